"""Elementwise activations as followers: ReLU, SiLU, sigmoid and clip (ReLU6 and the other clamps)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tvm import relax

from search.bindings import scalar
from search.followers.base import FollowerKind, FollowerMatch, register_follower

if TYPE_CHECKING:
    from search.bindings import Bindings
    from search.op import Op


class _Elementwise(FollowerKind):
    """A follower that is one Relax operator ``relax_op`` of the activation."""

    relax_op: str

    def match(self, bindings: Bindings, index: int, shape: tuple[int, ...]) -> FollowerMatch | None:
        return FollowerMatch(self.attrs(bindings.value(index))) if bindings.op_name(index) == self.relax_op else None

    def attrs(self, call: relax.Call) -> dict:
        return {}

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch()


@register_follower
class ReLU(_Elementwise):
    name, relax_op = "relu", "relax.nn.relu"

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.nn.relu(x)


@register_follower
class SiLU(_Elementwise):
    """``x * sigmoid(x)`` (Swish): ``nn.silu``, or a sigmoid whose one reader multiplies it by its input, as the ONNX
    frontend imports ``Mul(x, Sigmoid(x))``; one pass instead of two."""

    name, relax_op = "silu", "relax.nn.silu"

    def match(self, bindings: Bindings, index: int, shape: tuple[int, ...]) -> FollowerMatch | None:
        found = super().match(bindings, index, shape)
        data = bindings.activations(index)
        if found is not None or bindings.op_name(index) != "relax.sigmoid" or len(data) != 1:
            return found
        user = bindings.sole_user(bindings.var(index))
        if user is None or not bindings.free(user) or bindings.op_name(user) != "relax.multiply":
            return None
        other = bindings.other_operand(user, bindings.var(index))
        return FollowerMatch(claims=(user,)) if other is not None and other.same_as(data[0]) else None

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.nn.silu(x)


@register_follower
class Sigmoid(_Elementwise):
    name, relax_op = "sigmoid", "relax.sigmoid"

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.sigmoid(x)


@register_follower
class Clip(_Elementwise):
    name, relax_op = "clip", "relax.clip"

    def attrs(self, call: relax.Call) -> dict:
        return {"min": scalar(call.args[1]), "max": scalar(call.args[2])}

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.clip(x, op.attrs["min"], op.attrs["max"])

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch({"min": 0.0, "max": 6.0})
