"""The error a solver raises when it cannot do its job."""


class SolverError(RuntimeError):
    """A solver cannot do its job on this problem (too wide, bad parameter, a backend missing or refusing it)."""
