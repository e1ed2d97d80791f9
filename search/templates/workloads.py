"""What a kernel computes (workload, epilogue) and how it is built (layouts, knobs): the template interface records."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from search.errors import SearchError


@dataclass(frozen=True)
class Conv2DWorkload:
    """A 2-D convolution on logical NCHW activations and OIHW weights; depthwise when ``groups == channels``."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    dtype: str = "float32"

    @property
    def out_height(self) -> int:
        top, _, bottom, _ = self.padding
        span = (self.kernel[0] - 1) * self.dilation[0] + 1
        return (self.height + top + bottom - span) // self.strides[0] + 1

    @property
    def out_width(self) -> int:
        _, left, _, right = self.padding
        span = (self.kernel[1] - 1) * self.dilation[1] + 1
        return (self.width + left + right - span) // self.strides[1] + 1

    @property
    def kind(self) -> str:
        """The operator kind running it: ``depthwise_conv2d`` when groups == channels, else ``conv2d``."""
        return "depthwise_conv2d" if self.is_depthwise else "conv2d"

    @property
    def is_depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels == self.out_channels

    @property
    def in_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_channels, self.height, self.width)

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.out_height, self.out_width)

    @property
    def flops(self) -> int:
        """2 x multiply-accumulates."""
        macs_per_output = (self.in_channels // self.groups) * self.kernel[0] * self.kernel[1]
        return 2 * self.batch * self.out_channels * self.out_height * self.out_width * macs_per_output


@dataclass(frozen=True)
class DenseWorkload:
    """``out[b, o] = sum_i data[b, i] * weight[o, i]``."""

    batch: int
    in_features: int
    out_features: int
    dtype: str = "float32"

    kind = "dense"  # the operator kind running it (a class attribute, not a field)

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.in_features * self.out_features


@dataclass(frozen=True)
class BatchMatmulWorkload:
    """``out[b, i, j] = sum_k a[b, i, k] * w[b, k, j]``: a product of two activations per batch entry.

    The ``batch`` entries are ``batch // heads`` outer ones of ``heads`` each: the kernel sees its operands as 4-D
    ``(batch // heads, heads, m, k)`` and ``(batch // heads, heads, k, n)`` (attention's batch and heads), each of
    which a layout may store in another axis order."""

    batch: int
    m: int
    k: int
    n: int
    dtype: str = "float32"
    heads: int = 1

    def __post_init__(self) -> None:
        if self.heads < 1 or self.batch % self.heads:
            raise SearchError(f"heads={self.heads} must be positive and divide batch={self.batch}")

    kind = "batch_matmul"  # the operator kind running it (a class attribute, not a field)

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n


@dataclass(frozen=True)
class RowWorkload:
    """A computation along each of ``rows`` rows of ``cols`` elements, ``flops_per_element`` operations each."""

    rows: int
    cols: int

    flops_per_element: ClassVar[int] = 1

    @property
    def flops(self) -> int:
        return self.flops_per_element * self.rows * self.cols


@dataclass(frozen=True)
class SoftmaxWorkload(RowWorkload):
    """``out[r, :] = softmax(scale * data[r, :])`` (attention's scores, flattened to rows)."""

    scale: float = 1.0
    dtype: str = "float32"

    kind = "softmax"  # the operator kind running it (a class attribute, not a field)
    flops_per_element = 6  # the scale, the max, the subtraction, the sum and the division (exp counted as one)


@dataclass(frozen=True)
class LayerNormWorkload(RowWorkload):
    """``out[r, :] = (data[r, :] - mean) / sqrt(var + epsilon) * gamma + beta``."""

    epsilon: float = 1e-5
    dtype: str = "float32"

    kind = "layer_norm"  # the operator kind running it (a class attribute, not a field)
    flops_per_element = 7  # the two sums, the centring, the normalisation and the affine map


@dataclass(frozen=True)
class Epilogue:
    """Elementwise work fused into a kernel: ``act(acc + bias + residual)`` after the reduction (with
    ``residual_after_activation``: ``act(acc + bias) + residual``, a bottleneck's shortcut after its SiLU) and, with
    ``prologue``, ``relu(data * scale + shift)`` (per input channel) on the data before it (a pre-activation), or,
    with ``gate``, ``data * gate`` (a per-image, per-channel activation: squeeze-and-excitation's gate)."""

    bias: bool = True
    residual: bool = False
    activation: str | None = None  # a registered activation kind (``search.followers``), e.g. "relu", "silu"
    prologue: bool = False
    activation_attrs: tuple[tuple[str, float], ...] = ()  # its attributes (sorted pairs), e.g. (("alpha", 0.1),)
    gate: bool = False
    residual_after_activation: bool = False

    def __post_init__(self) -> None:
        from search.followers import activation_kind

        object.__setattr__(self, "activation_attrs", tuple(sorted((str(k), float(v))
                                                                  for k, v in self.activation_attrs)))
        if self.activation is not None:
            activation_kind(self.activation)
        if self.prologue and self.gate:
            raise SearchError("a kernel reads its data through a pre-activation or a gate, not both")
        if self.residual_after_activation and not (self.residual and self.activation):
            raise SearchError("a residual added after the activation needs a residual and an activation")

    @property
    def reads_through(self) -> bool:
        """Whether the kernel reads its data through a prologue: a pre-activation or a gate."""
        return self.prologue or self.gate


def epilogue_key(epilogue: Epilogue) -> dict:
    """The epilogue's fields for a cache key; ``prologue``, ``activation_attrs``, ``gate`` and
    ``residual_after_activation`` only when set, so that the keys of kernels without them are those they had before
    these existed."""
    fields = asdict(epilogue)
    for optional in ("prologue", "activation_attrs", "gate", "residual_after_activation"):
        if not fields[optional]:
            del fields[optional]
    return fields


Knobs = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class KernelSpec:
    """One kernel to build: workload, activation layouts, schedule knobs (sorted pairs; () = default), epilogue.

    ``workload`` is any frozen dataclass whose ``kind`` names a registered ``search.kinds.KernelKind``.
    """

    workload: Any
    in_layout: str
    out_layout: str
    knobs: Knobs = ()
    epilogue: Epilogue = Epilogue()
