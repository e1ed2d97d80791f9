"""The registry of operator kinds, looked up by name (as ``solvers.SOLVERS`` is for solvers)."""

from __future__ import annotations

from typing import TypeVar

from search.errors import SearchError
from search.kinds.base import KernelKind, OperatorKind

KINDS: dict[str, OperatorKind] = {}
"""Name -> kind instance, in registration order (the order in which kinds try to match a binding)."""

K = TypeVar("K", bound=type[OperatorKind])


def register(cls: K) -> K:
    """Class decorator: add an instance of ``cls`` to ``KINDS`` under ``cls.name`` (replacing one of that name)."""
    KINDS[cls.name] = cls()
    return cls


def get_kind(name: str) -> OperatorKind:
    """The registered kind called ``name``; ``SearchError`` naming the registered ones otherwise."""
    if name not in KINDS:
        raise SearchError(f"no operator kind {name!r} is registered; registered: {', '.join(KINDS)}")
    return KINDS[name]


def kernel_kind(name: str) -> KernelKind:
    """The registered kind ``name``, which must run as a kernel."""
    kind = get_kind(name)
    if not isinstance(kind, KernelKind):
        raise SearchError(f"kind {name} has no kernel")
    return kind
