"""Tiny Relax CNNs in the zoo's vocabulary (NCHW/OIHW, constant weights, ``main(data)``) for fast search tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import relax


class NetBuilder:
    """Emits zoo-style layers into an open BlockBuilder dataflow block, with seeded random weights."""

    def __init__(self, bb: relax.BlockBuilder, seed: int = 0) -> None:
        self.bb = bb
        self.rng = np.random.default_rng(seed)

    def const(self, shape: tuple[int, ...], scale: float = 0.2) -> relax.Constant:
        return relax.const((self.rng.standard_normal(shape) * scale).astype("float32"))

    def conv(self, x, out: int, k: int = 3, stride: int = 1, groups: int = 1, bias: bool = True,
             residual=None, act: str | None = "relu"):
        channels = x.ty.shape.values[1]
        y = self.bb.emit(relax.op.nn.conv2d(x, self.const((out, int(channels) // groups, k, k)), strides=stride,
                                            padding=k // 2, groups=groups))
        if bias:
            y = self.bb.emit(relax.op.add(y, self.const((1, out, 1, 1))))
        if residual is not None:
            y = self.bb.emit(relax.op.add(y, residual))
        return self.act(y, act)

    def act(self, y, act: str | None):
        if act == "relu":
            return self.bb.emit(relax.op.nn.relu(y))
        if act == "relu6":
            return self.bb.emit(relax.op.clip(y, 0, 6))
        return y

    def dense(self, x, out: int):
        features = int(x.ty.shape.values[1])
        y = self.bb.emit(relax.op.matmul(x, relax.op.permute_dims(self.const((out, features)))))
        return self.bb.emit(relax.op.add(y, self.const((out,))))

    def head(self, x, classes: int = 10):
        n, c = (int(v) for v in x.ty.shape.values[:2])
        pooled = self.bb.emit(relax.op.nn.adaptive_avg_pool2d(x, output_size=(1, 1)))
        return self.dense(self.bb.emit(relax.op.reshape(pooled, (n, c))), classes)


def build(shape: tuple[int, ...], body: Callable[[NetBuilder, relax.Var], relax.Expr], seed: int = 0) -> tvm.IRModule:
    """A module whose ``main(data)`` is ``body(builder, data)``."""
    bb = relax.BlockBuilder()
    data = relax.Var("data", relax.TensorType(shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(body(NetBuilder(bb, seed), data))
        bb.emit_func_output(out)
    return bb.get()


def residual_concat_net(batch: int = 1, size: int = 8) -> tvm.IRModule:
    """conv(3->16) -> conv(16->16, +residual) -> maxpool -> [conv 1x1, conv 3x3] -> concat(32) -> conv -> dw conv
    -> conv -> head: every kind of node, a residual epilogue and a two-input concat."""

    def body(net: NetBuilder, x):
        a = net.conv(x, 16)
        b = net.conv(a, 16, residual=a)
        p = net.bb.emit(relax.op.nn.max_pool2d(b, pool_size=(2, 2), strides=(2, 2)))
        left = net.conv(p, 16, k=1)
        right = net.conv(p, 16, act=None)
        cat = net.bb.emit(relax.op.concat([left, right], axis=1))
        c = net.conv(cat, 16, act="relu6")
        d = net.conv(c, 16, groups=16)
        e = net.conv(d, 16, k=1)
        return net.head(e)

    return build((batch, 3, size, size), body)


def pre_activation(net: NetBuilder, x, channels: int):
    """DenseNet's BatchNorm-ReLU before a convolution: ``relu(x * scale + shift)``, per channel."""
    x = net.bb.emit(relax.op.multiply(x, net.const((1, channels, 1, 1))))
    x = net.bb.emit(relax.op.add(x, net.const((1, channels, 1, 1))))
    return net.bb.emit(relax.op.nn.relu(x))


def dense_block_net(batch: int = 1) -> tvm.IRModule:
    """A stem convolution, two dense layers (concat -> BN-ReLU -> conv 1x1 -> conv 3x3, each concatenating every
    earlier output) and a transition (BN-ReLU -> conv 1x1)."""

    def body(net, x):
        features = [net.conv(x, 16)]
        for _ in range(2):
            cat = features[0] if len(features) == 1 else net.bb.emit(relax.op.concat(features, axis=1))
            h = net.conv(pre_activation(net, cat, 16 + 8 * (len(features) - 1)), 16, k=1)
            features.append(net.conv(h, 8, act=None))
        cat = net.bb.emit(relax.op.concat(features, axis=1))
        return net.conv(pre_activation(net, cat, 32), 16, k=1, act=None)

    return build((batch, 8, 6, 7), body)


def add_node_net() -> tvm.IRModule:
    """Two pooled branches added (a standalone add node), a per-channel scale and shift and a ReLU6 (followers),
    then a softmax head and a second (tuple) output."""

    def body(net: NetBuilder, x):
        a = net.conv(x, 8)
        b = net.conv(x, 8, act="relu6")
        pa = net.bb.emit(relax.op.nn.avg_pool2d(a, pool_size=(2, 2), strides=(2, 2)))
        pb = net.bb.emit(relax.op.nn.max_pool2d(b, pool_size=(2, 2), strides=(2, 2)))
        s = net.bb.emit(relax.op.add(pa, pb))
        s = net.bb.emit(relax.op.multiply(s, net.const((1, 8, 1, 1))))  # a BatchNorm after no conv
        s = net.bb.emit(relax.op.add(s, net.const((1, 8, 1, 1))))
        r = net.bb.emit(relax.op.clip(s, 0, 6))  # followers: the conv reads through no ReLU6 prologue
        c = net.conv(r, 8, k=1, bias=False, act=None)
        logits = net.head(c, 4)
        return relax.Tuple([net.bb.emit(relax.op.nn.softmax(logits)), c])

    return build((1, 4, 8, 8), body)


def ssd_like_net() -> tvm.IRModule:
    """Two feature maps, a box predictor (12 channels) on each, SSD's permute -> flatten -> 2-D concat -> reshape."""

    def body(net: NetBuilder, x):
        features = [net.conv(x, 8)]
        features.append(net.conv(features[0], 16, stride=2))
        flat = []
        for feature in features:
            p = net.conv(feature, 12, act=None)
            n, c, h, w = (int(v) for v in p.ty.shape.values)
            p = net.bb.emit(relax.op.permute_dims(p, [0, 2, 3, 1]))
            flat.append(net.bb.emit(relax.op.reshape(p, (n, h * w * c))))
        joined = net.bb.emit(relax.op.concat(flat, axis=1))
        return net.bb.emit(relax.op.reshape(joined, (1, int(joined.ty.shape.values[1]) // 4, 4)))

    return build((1, 4, 8, 8), body)


def unknown_ops_net() -> tvm.IRModule:
    """Operators no kind knows between tunable convolutions: sin, a grouped conv, a split into a tuple and its
    items, and ``call_tir`` of a PrimFunc of the module itself (a doubling)."""
    from tvm import te

    a_in = te.placeholder((1, 8, 8, 8), "float32", name="a")
    double = te.create_prim_func([a_in, te.compute(a_in.shape, lambda *i: a_in(*i) * 2.0, name="b")])
    bb = relax.BlockBuilder()
    gvar = bb.add_func(double.without_attr("global_symbol"), "double")
    data = relax.Var("data", relax.TensorType((1, 4, 8, 8), "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            net = NetBuilder(bb)
            a = net.conv(data, 8)
            t = bb.emit(relax.op.sin(a))
            g = net.conv(t, 8, groups=2, act=None)
            parts = bb.emit(relax.op.split(g, 2, axis=1))
            left, right = bb.emit(relax.TupleGetItem(parts, 0)), bb.emit(relax.TupleGetItem(parts, 1))
            joined = bb.emit(relax.op.concat([right, left], axis=1))
            doubled = bb.emit(relax.call_tir(gvar, [net.conv(joined, 8)], relax.TensorType((1, 8, 8, 8), "float32")))
            out = bb.emit_output(net.conv(doubled, 8, k=1))
        bb.emit_func_output(out)
    return bb.get()
