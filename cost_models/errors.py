"""The error a cost source raises when it cannot be used (a cluster that cannot be joined is one)."""


class CostSourceError(ValueError):
    """A cost source that cannot be used: an unknown name, a parameter it lacks or does not take, a bad value, or a
    cache or model file that cannot be opened."""
