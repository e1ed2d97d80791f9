"""Errors caused by the user's input to the search side: unknown models or operators, bad plans or ONNX files."""


class SearchError(ValueError):
    """Bad input to model loading, graph extraction, planning or export; the message says what and where."""
