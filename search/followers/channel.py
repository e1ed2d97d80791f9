"""Per-channel affine followers: a multiply or add of a (1, C, 1, 1) constant (a BatchNorm left unfolded)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tvm import relax

from search.followers.base import FollowerKind, FollowerMatch, register_follower
from search.layouts import layout

if TYPE_CHECKING:
    from search.bindings import Bindings
    from search.op import Op


class _PerChannel(FollowerKind):
    """``relax_op`` of a 4-D activation and a constant of one value per channel (``params["value"]``, (C,))."""

    relax_op: str

    def match(self, bindings: Bindings, index: int, shape: tuple[int, ...]) -> FollowerMatch | None:
        data = bindings.activations(index)
        if bindings.op_name(index) != self.relax_op or len(shape) != 4 or len(data) != 1:
            return None
        value = bindings.const(next(a for a in bindings.value(index).args if not a.same_as(data[0])))
        if value is None or value.shape != (1, shape[1], 1, 1):
            return None
        return FollowerMatch(params={"value": value.reshape(-1).astype("float32")})

    def constant(self, op: Op, stored: str) -> relax.Expr:
        return relax.const(layout(stored).from_logical(op.params["value"].reshape(1, -1, 1, 1)))

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch(params={"value": rng.uniform(0.5, 1.5, shape[1]).astype("float32")})


@register_follower
class ChannelScale(_PerChannel):
    name, relax_op = "channel_scale", "relax.multiply"

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.multiply(x, self.constant(op, stored))


@register_follower
class ChannelShift(_PerChannel):
    name, relax_op = "channel_shift", "relax.add"

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.add(x, self.constant(op, stored))
