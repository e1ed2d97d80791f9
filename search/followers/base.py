"""What a follower kind is: an operator that runs right after a node, in whatever layout the node writes (an
activation, a per-channel scale or shift, a pooling), recognised in the Relax bindings and emitted in a given layout.

A kind is one class: ``match`` recognises it at a binding, ``emit`` writes it for a value stored in a layout, and
``example`` gives the attributes and constants of a typical instance for the conformance suite
(``search.followers.checks``). ``register_follower`` adds it to ``FOLLOWERS`` by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from search.errors import SearchError

if TYPE_CHECKING:
    from tvm import relax

    from search.bindings import Bindings
    from search.op import Op


@dataclass(frozen=True)
class FollowerMatch:
    """A follower recognised at a binding: its attributes and constant operands (``Op.attrs``, ``Op.params``), and the
    later bindings it spans (``claims``: the last one's value is the follower's result)."""

    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    claims: tuple[int, ...] = ()


class FollowerKind(ABC):
    """One kind of follower; subclasses set ``name`` (the ops' kind, part of cost-cache keys of the chains that run
    it) and implement ``match``, ``emit`` and ``example``."""

    name: ClassVar[str]

    @abstractmethod
    def match(self, bindings: Bindings, index: int, shape: tuple[int, ...]) -> FollowerMatch | None:
        """This follower starting at binding ``index`` (whose result has logical ``shape``), reading the binding's one
        activation, or None. A follower spanning several bindings claims the later ones (``FollowerMatch.claims``),
        each only read by the one before, so that no other op reads a value inside it."""

    @abstractmethod
    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        """``op`` applied to ``x``, which is stored in layout ``stored``; the result is stored alike."""

    @abstractmethod
    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        """The attributes and constants of a typical instance reading a value of logical ``shape``."""


FOLLOWERS: dict[str, FollowerKind] = {}
"""Name -> follower kind, in registration order (the order in which they try to match a binding)."""

F = TypeVar("F", bound=type[FollowerKind])


def register_follower(cls: F) -> F:
    """Class decorator: add an instance of ``cls`` to ``FOLLOWERS`` under ``cls.name`` (replacing one of that name)."""
    FOLLOWERS[cls.name] = cls()
    return cls


def get_follower(name: str) -> FollowerKind:
    """The registered follower kind ``name``; ``SearchError`` naming the registered ones otherwise."""
    if name not in FOLLOWERS:
        raise SearchError(f"no follower kind {name!r} is registered; registered: {', '.join(FOLLOWERS)}")
    return FOLLOWERS[name]
