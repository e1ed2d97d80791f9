"""The errors of cost sources (a cluster that cannot be joined, a model file that cannot be used), light to import."""


class CostSourceError(ValueError):
    """A cost source that cannot be used: an unknown name, a parameter it lacks or does not take, a bad value, or a
    cache or model file that cannot be opened."""


class ModelError(ValueError):
    """A model file that cannot be used (wrong format or feature version), or a model asked what it cannot do."""
