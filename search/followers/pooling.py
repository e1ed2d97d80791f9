"""Poolings as followers: max, average and adaptive average pooling of an NCHW activation, run in the layout its
producer writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tvm import relax

from search.bindings import plain
from search.followers.base import FollowerKind, FollowerMatch, register_follower

if TYPE_CHECKING:
    from search.bindings import Bindings
    from search.op import Op


class _Pooling(FollowerKind):
    """``relax_op`` in NCHW, with the Relax attributes ``attr_names`` kept."""

    relax_op: str
    attr_names: tuple[str, ...]

    def match(self, bindings: Bindings, index: int, shape: tuple[int, ...]) -> FollowerMatch | None:
        call = bindings.value(index)
        if bindings.op_name(index) != self.relax_op or call.attrs.layout != "NCHW":
            return None
        return FollowerMatch({key: plain(getattr(call.attrs, key)) for key in self.attr_names})


class _Window(_Pooling):
    attr_names = ("pool_size", "strides", "padding", "dilation", "ceil_mode")

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch({"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "dilation": (1, 1),
                              "ceil_mode": False})


@register_follower
class MaxPool2D(_Window):
    name, relax_op = "max_pool2d", "relax.nn.max_pool2d"

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        a = op.attrs
        return relax.op.nn.max_pool2d(x, a["pool_size"], a["strides"], a["padding"], a["dilation"], a["ceil_mode"],
                                      layout=stored, out_layout=stored)


@register_follower
class AvgPool2D(_Window):
    name, relax_op = "avg_pool2d", "relax.nn.avg_pool2d"
    attr_names = (*_Window.attr_names, "count_include_pad")

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        a = op.attrs
        return relax.op.nn.avg_pool2d(x, a["pool_size"], a["strides"], a["padding"], a["dilation"], a["ceil_mode"],
                                      count_include_pad=a["count_include_pad"], layout=stored, out_layout=stored)

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch({**super().example(shape, rng).attrs, "count_include_pad": False})


@register_follower
class AdaptiveAvgPool2D(_Pooling):
    name, relax_op = "adaptive_avg_pool2d", "relax.nn.adaptive_avg_pool2d"
    attr_names = ("output_size",)

    def emit(self, op: Op, x: relax.Expr, stored: str) -> relax.Expr:
        return relax.op.nn.adaptive_avg_pool2d(x, op.attrs["output_size"], layout=stored, out_layout=stored)

    def example(self, shape: tuple[int, ...], rng: np.random.Generator) -> FollowerMatch:
        return FollowerMatch({"output_size": (1, 1)})
