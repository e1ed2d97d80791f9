"""Relax building blocks for the zoo: every layer emits the fixed op vocabulary and runs a numpy shadow of itself.

A network body is a function ``body(net, x) -> Tensor | tuple[Tensor, ...]`` that calls the ``Net`` methods below;
``Network`` wraps a body into a builder of ``tvm.IRModule``. Each ``Tensor`` carries its Relax variable (hence its
static shape) and numpy *shadows*: the same computation on other inputs. Shadow 0 is a random float32 calibration
batch (``CALIBRATION_BATCH`` images of the network's ``calibration_size``) whose per-channel statistics become the
running mean and variance of every BatchNorm, as training would leave them; this keeps activations O(1) through any
depth. Further shadows are optional reference inputs, computed in float64, which makes the builder a numpy reference
implementation of the network.

Weights are drawn per layer from ``numpy.random.default_rng([seed, layer_index])`` and calibration happens at a fixed
size, so a seed gives the same weights at every batch and image size (except a weight whose shape depends on the
image size, such as VGG's first dense layer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
from threadpoolctl import threadpool_limits
from tvm import relax

from search.relax_exprs import static_shape
from search.zoo.activations import ACTIVATIONS

CALIBRATION_BATCH = 2
_SHRINK_SAMPLES = 16  # per-channel variances from fewer samples than this lean towards the layer's mean variance

IntPair = int | tuple[int, int]


def _pair(v: IntPair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


@dataclass(frozen=True)
class Tensor:
    """A value of the network under construction."""

    var: relax.Expr
    shadows: tuple[np.ndarray | None, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.var.ty.shape)

    @property
    def channels(self) -> int:
        return self.shape[1]


# ---------------------------------------------------------------------------------------------------- numpy kernels
def conv2d_np(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pad: tuple[int, ...], groups: int) -> np.ndarray:
    """NCHW/OIHW convolution; ``pad`` is (top, left, bottom, right)."""
    n, c, _, _ = x.shape
    o, i, kh, kw = w.shape
    sh, sw = stride
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    g, og = groups, o // groups
    patches = [
        xp[:, :, a : a + sh * (oh - 1) + 1 : sh, b : b + sw * (ow - 1) + 1 : sw] for a in range(kh) for b in range(kw)
    ]
    if i == 1 and og == 1:  # depthwise: per-channel multiply-accumulate
        taps = w.reshape(o, kh * kw)
        out = np.zeros((n, o, oh, ow), dtype=np.result_type(x, w))
        for k, patch in enumerate(patches):
            out += patch * taps[None, :, k, None, None]
        return out
    # im2col: (g, i * kh * kw, n * oh * ow) columns, one matmul per group
    cols = np.stack(patches, axis=2).reshape(n, g, i * kh * kw, oh * ow).transpose(1, 2, 0, 3)
    cols = cols.reshape(g, i * kh * kw, n * oh * ow)
    out = w.reshape(g, og, i * kh * kw) @ cols
    return out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3)


def pool2d_np(x: np.ndarray, kind: str, kernel: tuple[int, int], stride: tuple[int, int], pad: tuple[int, ...]):
    """Max or average (zero padding counted, as ``count_include_pad=True``) pooling; ``pad`` is (t, l, b, r)."""
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])), constant_values=fill)
    (kh, kw), (sh, sw) = kernel, stride
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    windows = [
        xp[:, :, a : a + sh * (oh - 1) + 1 : sh, b : b + sw * (ow - 1) + 1 : sw] for a in range(kh) for b in range(kw)
    ]
    if kind == "max":
        return np.maximum.reduce(windows)
    return np.add.reduce(windows) / (kh * kw)


def layer_norm_np(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """Normalise over the last axis, then scale and shift."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax_np(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def upsample_np(x: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upsampling of an NCHW array by an integer ``factor``."""
    return x.repeat(factor, axis=2).repeat(factor, axis=3)




# ---------------------------------------------------------------------------------------------------- the builder
class Net:
    """Emits layers into a ``relax.BlockBuilder`` (inside its dataflow block) and runs their numpy shadows.

    Every method takes a ``name``; the Relax variable of the layer's main op gets exactly that name, the bias add,
    residual add and activation get ``_bias``, ``_add`` and ``_{activation}`` (``_relu``, ``_silu``, ...;
    ``search.zoo.activations``) appended.
    """

    def __init__(self, bb: relax.BlockBuilder, seed: int, bn_eps: float = 1e-5) -> None:
        self.bb = bb
        self.seed = seed
        self.bn_eps = bn_eps
        self._layers = 0

    # -- helpers
    def _rng(self) -> np.random.Generator:
        self._layers += 1
        return np.random.default_rng([self.seed, self._layers])

    def _emit(self, expr: relax.Expr, name: str) -> relax.Var:
        return self.bb.emit(expr, name_hint=name)

    def _bn_fold(self, rng: np.random.Generator, z: np.ndarray | None, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Draw gamma/beta, take running mean/var from the calibration shadow ``z``; return (scale, shift)."""
        if z is None:
            raise ValueError(f"{name}: BatchNorm needs the calibration shadow, which was dropped earlier")
        channels = z.shape[1]
        gamma = rng.uniform(0.5, 1.5, channels)
        beta = rng.normal(0.0, 0.2, channels)
        mean = z.mean(axis=(0, 2, 3))
        var = z.var(axis=(0, 2, 3))
        samples = z.shape[0] * z.shape[2] * z.shape[3]
        weight = samples / (samples + _SHRINK_SAMPLES)
        var = weight * var + (1.0 - weight) * var.mean()
        scale = gamma / np.sqrt(var + self.bn_eps)
        return scale, beta - mean * scale

    def _activate(self, t: Tensor, act: str | None, name: str) -> Tensor:
        """``act`` (a key of ``ACTIVATIONS``, or None for none) of ``t``, named ``{name}_{act}``."""
        if act is None:
            return t
        if act not in ACTIVATIONS:
            raise ValueError(f"unknown activation {act!r}")
        form = ACTIVATIONS[act]
        return Tensor(form.emit(self._emit, t.var, f"{name}_{act}"), _map(form.numpy, t))

    # -- layers
    def conv(
        self,
        x: Tensor,
        channels: int,
        kernel: IntPair,
        *,
        name: str,
        stride: IntPair = 1,
        padding: IntPair = 0,
        groups: int = 1,
        bn: bool = True,
        bias: bool = False,
        act: str | None = "relu",
        residual: Tensor | None = None,
    ) -> Tensor:
        """conv2d (+ BatchNorm folded into weight and bias) + bias, then optional residual add and activation.

        Weights are He-normal (std sqrt(2 / fan_in)). Without ``bn`` the bias add is still emitted: a random bias if
        ``bias`` (prediction heads), zeros if not (DenseNet's convs, which a later BatchNorm follows). With ``bn`` the
        conv's own bias would be absorbed by the calibrated running mean, so ``bias`` makes no difference.
        """
        rng = self._rng()
        kh, kw = _pair(kernel)
        ph, pw = _pair(padding)
        pad = (ph, pw, ph, pw)
        stride = _pair(stride)
        fan_in = x.channels // groups * kh * kw
        w = he_normal(rng, (channels, x.channels // groups, kh, kw), fan_in)
        raw = [
            None if s is None else conv2d_np(s, w.astype(s.dtype, copy=False), stride, pad, groups) for s in x.shadows
        ]
        if bn:
            scale, shift = self._bn_fold(rng, raw[0], name)
            w *= scale.astype(np.float32)[:, None, None, None]
        else:
            scale = np.ones(channels)
            shift = rng.normal(0.0, 0.1, channels) if bias else np.zeros(channels)
        shadows = [None if r is None else _affine(r, scale, shift) for r in raw]
        conv = relax.op.nn.conv2d(x.var, aligned_const(w), strides=stride, padding=pad, groups=groups)
        out = self._emit(conv, name)
        bias = relax.const(shift.astype(np.float32).reshape(1, channels, 1, 1))
        out = self._emit(relax.op.add(out, bias), f"{name}_bias")
        if residual is not None:
            out = self._emit(relax.op.add(out, residual.var), f"{name}_add")
            shadows = [None if s is None or r is None else s + r for s, r in zip(shadows, residual.shadows)]
        return self._activate(Tensor(out, tuple(shadows)), act, name)

    def bn_act(self, x: Tensor, *, name: str, act: str | None = "relu") -> Tensor:
        """A BatchNorm that follows no convolution (DenseNet's pre-activation): multiply, add, activation."""
        scale, shift = self._bn_fold(self._rng(), x.shadows[0], name)
        c = x.channels
        out = self._emit(relax.op.multiply(x.var, relax.const(scale.astype(np.float32).reshape(1, c, 1, 1))), name)
        out = self._emit(relax.op.add(out, relax.const(shift.astype(np.float32).reshape(1, c, 1, 1))), f"{name}_bias")
        shadows = _map(lambda s: _affine(s, scale, shift), x)
        return self._activate(Tensor(out, shadows), act, name)

    def multiply(self, x: Tensor, gate: Tensor, *, name: str) -> Tensor:
        """``R.multiply(x, gate)`` of two activations: a (N, C, 1, 1) gate scaling x's channels (squeeze-excitation)."""
        shadows = tuple(None if s is None or g is None else s * g for s, g in zip(x.shadows, gate.shadows))
        return Tensor(self._emit(relax.op.multiply(x.var, gate.var), name), shadows)

    def max_pool(self, x: Tensor, kernel: IntPair, stride: IntPair, padding: IntPair = 0, *, name: str) -> Tensor:
        return self._pool(x, "max", kernel, stride, padding, name)

    def avg_pool(self, x: Tensor, kernel: IntPair, stride: IntPair, padding: IntPair = 0, *, name: str) -> Tensor:
        """Average pooling counting zero padding (``count_include_pad=True``, PyTorch's default)."""
        return self._pool(x, "avg", kernel, stride, padding, name)

    def _pool(self, x: Tensor, kind: str, kernel: IntPair, stride: IntPair, padding: IntPair, name: str) -> Tensor:
        kernel, stride = _pair(kernel), _pair(stride)
        ph, pw = _pair(padding)
        pad = (ph, pw, ph, pw)
        if kind == "max":
            call = relax.op.nn.max_pool2d(x.var, kernel, stride, pad)
        else:
            call = relax.op.nn.avg_pool2d(x.var, kernel, stride, pad, count_include_pad=True)
        return Tensor(self._emit(call, name), _map(lambda s: pool2d_np(s, kind, kernel, stride, pad), x))

    def global_avg_pool(self, x: Tensor, *, name: str) -> Tensor:
        call = relax.op.nn.adaptive_avg_pool2d(x.var, output_size=(1, 1))
        return Tensor(self._emit(call, name), _map(lambda s: s.mean(axis=(2, 3), keepdims=True), x))

    def concat(self, xs: Sequence[Tensor], *, name: str, axis: int = 1) -> Tensor:
        """Concatenate along ``axis`` (by default 1: channels of NCHW tensors, or features of 2-D ones)."""
        if len(xs) == 1:
            return xs[0]
        shadows = tuple(
            None if any(x.shadows[k] is None for x in xs) else np.concatenate([x.shadows[k] for x in xs], axis=axis)
            for k in range(len(xs[0].shadows))
        )
        return Tensor(self._emit(relax.op.concat([x.var for x in xs], axis=axis), name), shadows)

    def reshape(self, x: Tensor, shape: Sequence[int], *, name: str) -> Tensor:
        """Reshape to a static ``shape``; dimension 0 (the batch) is taken from ``x`` whatever ``shape[0]`` says."""
        shape = (x.shape[0], *[int(d) for d in shape[1:]])
        if int(np.prod(shape)) != int(np.prod(x.shape)):
            raise ValueError(f"{name}: cannot reshape {x.shape} to {shape}")
        per_item = int(np.prod(shape[1:]))
        return Tensor(
            self._emit(relax.op.reshape(x.var, shape), name),
            _map(lambda s: s.reshape(s.shape[0], *shape[1:]) if s[0].size == per_item else None, x),
        )

    def flatten(self, x: Tensor, *, name: str) -> Tensor:
        """(N, C, H, W) -> (N, C*H*W) as ``R.reshape``; shadows of other spatial sizes keep their own size."""
        n, rest = x.shape[0], int(np.prod(x.shape[1:]))
        var = self._emit(relax.op.reshape(x.var, (n, rest)), name)
        return Tensor(var, _map(lambda s: s.reshape(s.shape[0], -1), x))

    def permute(self, x: Tensor, axes: Sequence[int], *, name: str) -> Tensor:
        var = self._emit(relax.op.permute_dims(x.var, list(axes)), name)
        return Tensor(var, _map(lambda s: s.transpose(axes), x))

    def dense(self, x: Tensor, units: int, *, name: str, act: str | None = None) -> Tensor:
        """``R.matmul(x, W)`` with a constant W of shape (in, units), then ``R.add`` of a (1, units) bias."""
        rng = self._rng()
        n_in = x.shape[1]
        gain = 2.0 if act == "relu" else 1.0
        w = he_normal(rng, (n_in, units), n_in, gain)
        b = rng.normal(0.0, 0.1, (1, units)).astype(np.float32)
        out = self._emit(relax.op.matmul(x.var, aligned_const(w)), name)
        out = self._emit(relax.op.add(out, relax.const(b)), f"{name}_bias")
        # A shadow whose feature count differs (a calibration image of another size before VGG's classifier) ends.
        shadows = tuple(
            None if s is None or s.shape[1] != n_in else s @ w.astype(s.dtype, copy=False) + b for s in x.shadows
        )
        return self._activate(Tensor(out, shadows), act, name)

    def apply(self, call: relax.Expr, name: str, reference: Callable[..., np.ndarray | None], *args: Tensor) -> Tensor:
        """Bind ``call`` as ``name``; its shadows are ``reference`` of ``args``' shadows (None where one is None)."""
        shadows = tuple(None if any(v is None for v in values) else reference(*values)
                        for values in zip(*(a.shadows for a in args), strict=True))
        return Tensor(self._emit(call, name), shadows)

    def add(self, a: Tensor, b: Tensor, *, name: str) -> Tensor:
        """The sum of two tensors of one shape (a residual add after an activation)."""
        return self.apply(relax.op.add(a.var, b.var), name, np.add, a, b)

    def layer_norm(self, x: Tensor, *, name: str, eps: float = 1e-6) -> Tensor:
        """``R.nn.layer_norm`` over the last axis; gamma in [0.8, 1.2], beta ~ N(0, 0.05)."""
        rng = self._rng()
        width = x.shape[-1]
        gamma = rng.uniform(0.8, 1.2, width).astype(np.float32)
        beta = rng.normal(0.0, 0.05, width).astype(np.float32)
        call = relax.op.nn.layer_norm(x.var, relax.const(gamma), relax.const(beta), axes=[-1], epsilon=eps)
        return self.apply(call, name, lambda s: layer_norm_np(s, gamma, beta, eps), x)

    def channel_scale(self, x: Tensor, low: float, high: float, *, name: str) -> Tensor:
        """A multiply of an NCHW tensor by a (1, C, 1, 1) constant drawn uniformly from [low, high] (a layer scale)."""
        scale = self._rng().uniform(low, high, x.channels).astype(np.float32).reshape(1, -1, 1, 1)
        return self.apply(relax.op.multiply(x.var, relax.const(scale)), name, lambda s: s * scale, x)

    def slice(self, x: Tensor, axis: int, begin: int, end: int, *, name: str) -> Tensor:
        """``x[..., begin:end, ...]`` on ``axis`` (``R.strided_slice``)."""
        index = (slice(None),) * axis + (slice(begin, end),)
        call = relax.op.strided_slice(x.var, axes=[axis], begin=[begin], end=[end])
        return self.apply(call, name, lambda s: s[index], x)

    def softmax(self, x: Tensor, axis: int, *, name: str) -> Tensor:
        return self.apply(relax.op.nn.softmax(x.var, axis=axis), name, lambda s: softmax_np(s, axis), x)

    def upsample(self, x: Tensor, factor: int, *, name: str) -> Tensor:
        """Nearest-neighbour upsampling by ``factor`` (``R.image.resize2d`` as the ONNX frontend reads PyTorch's
        ``Upsample(mode="nearest")``: asymmetric coordinates, rounding down)."""
        h, w = x.shape[2:]
        call = relax.op.image.resize2d(x.var, (h * factor, w * factor), method="nearest_neighbor",
                                       coordinate_transformation_mode="asymmetric", rounding_method="floor")
        return self.apply(call, name, lambda s: upsample_np(s, factor), x)


def he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, gain: float = 2.0) -> np.ndarray:
    """N(0, gain / fan_in) float32 weights, drawn in place into a 64-byte aligned buffer (see ``aligned_const``)."""
    nbytes = int(np.prod(shape)) * 4
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    offset = -raw.ctypes.data % 64
    w = raw[offset : offset + nbytes].view(np.float32).reshape(shape)
    rng.standard_normal(out=w, dtype=np.float32)
    w *= np.float32(np.sqrt(gain / fan_in))
    return w


def aligned_const(array: np.ndarray) -> relax.Expr:
    """A Relax constant sharing ``array``'s memory when it is aligned (large weights: no copy), else a copy.

    The array must not be modified afterwards.
    """
    if array.flags.c_contiguous and array.ctypes.data % 64 == 0:
        return relax.const(tvm.runtime.from_dlpack(array))
    return relax.const(array)


def _affine(s: np.ndarray, scale: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Per-channel ``s * scale + shift`` on an NCHW shadow, in the shadow's precision."""
    return s * scale.astype(s.dtype)[None, :, None, None] + shift.astype(s.dtype)[None, :, None, None]


def _map(fn: Callable[[np.ndarray], np.ndarray | None], t: Tensor) -> tuple[np.ndarray | None, ...]:
    return tuple(None if s is None else fn(s) for s in t.shadows)


# ---------------------------------------------------------------------------------------------------- networks
def single_threaded_blas() -> threadpool_limits:
    """Limit BLAS to one thread while the shadows run.

    The shadows' matrices are small; on a busy 2-core machine a 2-thread OpenBLAS waiting for its second thread made
    them up to 50x slower than one thread.
    """
    return threadpool_limits(limits=1, user_api="blas")


Body = Callable[[Net, Tensor], "Tensor | tuple[Tensor, ...]"]


@dataclass(frozen=True)
class Network:
    """A builder: ``network(batch=1, image_size=224, seed=0) -> tvm.IRModule`` with one input ``data``.

    ``calibration_size`` is the image size of the BatchNorm calibration batch (large enough that the deepest feature
    maps still have a few pixels); ``bn_eps`` the BatchNorm epsilon of the reference model.
    """

    body: Body
    calibration_size: int
    bn_eps: float = 1e-5

    def __call__(self, *, batch: int = 1, image_size: int = 224, seed: int = 0) -> tvm.IRModule:
        return self.build(batch=batch, image_size=image_size, seed=seed)[0]

    def build(
        self, *, batch: int, image_size: int, seed: int, references: Sequence[np.ndarray] = ()
    ) -> tuple[tvm.IRModule, list[np.ndarray | tuple[np.ndarray, ...]]]:
        """The module and, per reference input of shape (batch, 3, image_size, image_size), the numpy output."""
        shape = (batch, 3, image_size, image_size)
        for ref in references:
            if tuple(ref.shape) != shape:
                raise ValueError(f"reference input has shape {tuple(ref.shape)}, the module takes {shape}")
        size = self.calibration_size
        calibration = np.random.default_rng([seed, 0]).standard_normal(
            (CALIBRATION_BATCH, 3, size, size), dtype=np.float32
        )
        shadows = (calibration, *(np.asarray(r, dtype=np.float64) for r in references))
        bb = relax.BlockBuilder()
        data = relax.Var("data", relax.TensorType(shape, "float32"))
        net = Net(bb, seed, self.bn_eps)
        with single_threaded_blas(), bb.function("main", [data]):
            with bb.dataflow():
                out = self.body(net, Tensor(data, shadows))
                outs = out if isinstance(out, tuple) else (out,)
                result = relax.Tuple([t.var for t in outs]) if isinstance(out, tuple) else out.var
                gv = bb.emit_output(result)
            bb.emit_func_output(gv)
        # Binds the last op straight to the output variable instead of through an alias.
        mod = relax.transform.CanonicalizeBindings()(bb.get())
        refs = []
        for k in range(1, len(shadows)):
            values = tuple(t.shadows[k] for t in outs)
            refs.append(values if isinstance(out, tuple) else values[0])
        return mod, refs


# ---------------------------------------------------------------------------------------------------- vocabulary
VOCABULARY = frozenset(
    {
        "relax.nn.conv2d",
        "relax.add",
        "relax.multiply",
        "relax.nn.relu",
        "relax.clip",
        "relax.nn.silu",
        "relax.sigmoid",
        "relax.divide",
        "relax.nn.max_pool2d",
        "relax.nn.avg_pool2d",
        "relax.nn.adaptive_avg_pool2d",
        "relax.concat",
        "relax.reshape",
        "relax.matmul",
        "relax.permute_dims",
        "relax.nn.gelu",
        "relax.nn.layer_norm",
        "relax.nn.softmax",
        "relax.strided_slice",
        "relax.image.resize2d",
        "relax.subtract",
    }
)


def _prim(expr) -> float:
    while hasattr(expr, "value"):
        expr = expr.value
    return float(expr)


def vocabulary_violations(mod: tvm.IRModule) -> list[str]:
    """What in ``mod["main"]`` falls outside the zoo's op vocabulary (see ``search.zoo``); empty when all is well.

    Checks every binding: a call to an op of ``VOCABULARY`` with the documented attributes (NCHW / OIHW layouts,
    constant conv and dense weights, global adaptive pooling, concat on axis 1 or the last of a 3-D tensor, clip only
    as ReLU6 or HardSigmoid's (0, 1), divide only by a scalar constant as in HardSwish, layer norm over the last axis,
    nearest NCHW resize), or the output tuple; every tensor float32 with a static shape.
    """
    problems = []
    func = mod["main"]
    if len(func.params) != 1:
        problems.append(f"main takes {len(func.params)} inputs, expected 1")
    for block in func.body.blocks:
        for binding in block.bindings:
            var, value = binding.var, binding.value
            where = f"binding {var.name!r}"
            if isinstance(value, relax.Tuple):
                continue
            if not isinstance(var.ty, relax.TupleType) and static_shape(var) is None:
                problems.append(f"{where}: no static tensor shape ({var.ty})")
                continue
            if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
                problems.append(f"{where}: {type(value).__name__} is not a call to a Relax operator")
                continue
            op = value.op.name
            if op not in VOCABULARY:
                problems.append(f"{where}: operator {op} is outside the vocabulary")
                continue
            if var.ty.dtype != "float32":
                problems.append(f"{where}: dtype {var.ty.dtype}, expected float32")
            attrs = value.attrs
            if op == "relax.nn.conv2d":
                if (str(attrs.data_layout), str(attrs.kernel_layout)) != ("NCHW", "OIHW"):
                    problems.append(f"{where}: conv2d layouts {attrs.data_layout}/{attrs.kernel_layout}")
                if not isinstance(value.args[1], tvm.ir.expr.Constant):
                    problems.append(f"{where}: conv2d weight is not a constant")
            elif op in ("relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"):
                if str(attrs.layout) != "NCHW":
                    problems.append(f"{where}: pooling layout {attrs.layout}")
                if op.endswith("adaptive_avg_pool2d") and [int(v) for v in attrs.output_size] != [1, 1]:
                    problems.append(f"{where}: adaptive_avg_pool2d output size {list(attrs.output_size)}, expected 1x1")
            elif op == "relax.concat" and int(attrs.axis) != 1 and (int(attrs.axis), len(var.ty.shape)) != (2, 3):
                problems.append(f"{where}: concat on axis {attrs.axis}, expected 1 (or 2 of a 3-D tensor)")
            elif op == "relax.nn.layer_norm" and [int(a) for a in attrs.axes] not in ([-1], [len(var.ty.shape) - 1]):
                problems.append(f"{where}: layer_norm over axes {list(attrs.axes)}, expected the last")
            elif op == "relax.image.resize2d" and (attrs.layout, attrs.method) != ("NCHW", "nearest_neighbor"):
                problems.append(f"{where}: resize2d {attrs.method} in {attrs.layout}, expected nearest in NCHW")
            elif op == "relax.clip" and (_prim(value.args[1]), _prim(value.args[2])) not in ((0.0, 6.0), (0.0, 1.0)):
                problems.append(f"{where}: clip bounds other than (0, 6) or (0, 1)")
            elif op == "relax.divide" and not (isinstance(value.args[1], tvm.ir.expr.Constant)
                                               and len(value.args[1].value.shape) == 0):
                problems.append(f"{where}: divide by other than a scalar constant")
            elif op == "relax.matmul":
                weight = value.args[1]
                if not isinstance(weight, tvm.ir.expr.Constant) or len(getattr(weight.value, "shape", ())) != 2:
                    problems.append(f"{where}: matmul weight is not a 2-D constant")
    return problems
