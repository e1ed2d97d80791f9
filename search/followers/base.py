"""What a follower kind is: an operator that runs right after a node, in whatever layout the node writes (an
activation, a per-channel scale or shift, a pooling), recognised in the Relax bindings and emitted in a given layout.

A kind is one class: ``match`` recognises it at a binding, ``emit`` writes it for a value stored in a layout, and
``example`` gives the attributes and constants of a typical instance for the conformance suite
(``search.followers.checks``). ``register_follower`` adds it to ``FOLLOWERS`` by name. An ``ActivationKind`` is an
elementwise function that kernels also apply in their epilogue (``search.templates.workloads.Epilogue.activation``
names it): it says how to compute it on one element (``tir``, ``numpy``) and in which Relax forms to find it
(``forms``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from search.errors import SearchError
from search.followers.forms import Form

if TYPE_CHECKING:
    import tvm
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
    revision: ClassVar[int] = 0
    """Raised whenever what ``emit`` compiles changes; part of the cost-cache keys of chains running the kind when not
    0, so that timings of the former code are not reused."""

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

    def written(self, op: Op, x: relax.Expr) -> list[relax.Expr]:
        """``op`` applied to NCHW ``x`` in each Relax form ``match`` must recognise (by default as ``emit`` writes
        it); the conformance suite checks each."""
        return [self.emit(op, x, "NCHW")]


class ActivationKind(FollowerKind):
    """An elementwise activation ``f(x)``, recognised in any of its ``forms``, emitted as one vectorised pass and
    fused into kernel epilogues. Subclasses set ``name``, ``forms`` and ``tolerance`` and implement ``tir`` and
    ``numpy``; ``attributes`` names the attributes its forms capture, with their ``example`` values."""

    forms: ClassVar[tuple[Form, ...]]
    revision = 1  # emitted as a vectorised pass of ``tir`` (was: the Relax operator as TVM legalises it)
    tolerance: ClassVar[float] = 1e-6
    """Largest error of ``tir`` in float32 against ``numpy``, in units of max(1, |f(x)|)."""
    attributes: ClassVar[dict[str, float]] = {}

    @abstractmethod
    def tir(self, x: tvm.tirx.PrimExpr, attrs: dict[str, float]) -> tvm.tirx.PrimExpr:
        """``f`` of one element, vectorising (no scalar library calls: ``search.followers.fast_math``)."""

    @abstractmethod
    def numpy(self, x: np.ndarray, attrs: dict[str, float]) -> np.ndarray:
        """``f`` in numpy (float64), the reference of ``tir``."""

    def match(self, bindings: Bindings, index: int, shape: tuple[int, ...]) -> FollowerMatch | None:
        for form in self.forms:
            found = form.match(bindings, index)
            if found is not None:
                return FollowerMatch(found[0], claims=found[1])
        return None

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        from tvm import relax, te

        attrs = dict(op.attrs)
        compute = lambda data: te.compute(data.shape, lambda *i: self.tir(data(*i), attrs),  # noqa: E731
                                          name=self.name)
        return relax.BlockBuilder.current().call_te(compute, x, primfunc_name_hint=self.name)

    def written(self, op: Op, x: relax.Expr) -> list[relax.Expr]:
        return [form.write(x, dict(op.attrs)) for form in self.forms]

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch(dict(self.attributes))


FOLLOWERS: dict[str, FollowerKind] = {}
"""Name -> follower kind, in registration order (which breaks ties of ``longest_match``)."""

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


def activation_kind(name: str) -> ActivationKind:
    """The registered activation kind ``name`` (one a kernel epilogue can apply); ``SearchError`` naming them
    otherwise."""
    kind = FOLLOWERS.get(name)
    if not isinstance(kind, ActivationKind):
        names = ", ".join(n for n, k in FOLLOWERS.items() if isinstance(k, ActivationKind))
        raise SearchError(f"unknown activation {name!r}; registered activations: {names}")
    return kind


def longest_match(bindings: Bindings, index: int, shape: tuple[int, ...], kinds: Iterable[FollowerKind]
                  ) -> tuple[FollowerKind, FollowerMatch] | None:
    """The kind of ``kinds`` whose match at binding ``index`` spans the most bindings, all unclaimed (the first of
    equal ones), and its match; None if none matches."""
    best = None
    for kind in kinds:
        found = kind.match(bindings, index, shape)
        if found is not None and all(map(bindings.free, found.claims)) and (
                best is None or len(found.claims) > len(best[1].claims)):
            best = kind, found
    return best
