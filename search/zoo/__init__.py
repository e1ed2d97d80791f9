"""The model zoo: real CNNs built directly in TVM Relax with seeded random weights, plus ONNX files.

``load_model(name_or_path, batch=None, image_size=None, seed=0, input_shape=None)`` returns a ``tvm.IRModule`` whose
``main(data)`` takes one float32 input of shape (batch, 3, H, W) (a BERT's ``main(input_ids, token_type_ids)`` two
int64 (batch, sequence) inputs, its sequence length given as ``image_size`` or ``--input-shape N,S``; an ONNX file's
``main`` takes its inputs, see below);
``MODELS`` lists the zoo; ``model_stats(mod)`` counts convolutions and dense layers and their FLOPs; ``input_shapes``
parses the ``--input-shape`` form (``shapes``).

Networks (torchvision definitions for the classifiers, so conv2d counts match):

================  =====  ======  =====
name              input  conv2d  dense
================  =====  ======  =====
resnet18            224      20      1
resnet50            224      53      1
vgg19_bn            224      16      3
inception_v3        299      94      1   (no auxiliary head)
densenet121         224     120      1
densenet201         224     200      1
mobilenet_v2        224      52      1
efficientnet_b0     224      81      1   (16 MBConv blocks with squeeze-and-excitation, SiLU)
mobilenet_v3_large  224      62      2   (HardSwish, squeeze-and-excitation gated by HardSigmoid)
ssd_resnet50_512    512      73      0   (GluonCV ssd_512_resnet50_v1_voc; outputs a tuple, see ``ssd.py``)
convnext_tiny       224      22     37   (torchvision; LayerNorm, GELU, layer scale, see ``convnext.py``)
yolov8n             640      64      0   (Ultralytics, 80 classes; one (N, 84, A) output, see ``yolov8.py``)
yolov8s             640      64      0   (the same at width 0.5)
bert_base           128       0     72   (+ 24 matmuls of activations; Hugging Face's BertModel without pooler)
bert_large          128       0    144   (+ 48)
bert_small           16       0     12   (+ 4; 2 layers, 64 hidden, for tests)
vit_b16             224       1     73   (+ 24; timm's vit_base_patch16_224)
vit_small            32       1     13   (+ 4; 2 layers, 64 hidden, 10 classes, for tests)
================  =====  ======  =====

The transformers (``transformer.py``) keep their tokens as 2-D (tokens, hidden) tensors, so their linear layers are
the dense ops of item 6 below, and the attention's 4-D ``R.matmul`` of two activations are ``batch_matmul`` ops; their
other operators (embedding ``R.take``, ``R.nn.layer_norm``, ``R.nn.softmax``, ``R.nn.gelu``, reshapes and transposes
splitting and merging the heads) lie outside the CNN vocabulary below and become fixed ops of the graph.

Weights
-------
Convolutions are He-normal; BatchNorm parameters are drawn (gamma in [0.5, 1.5], beta ~ N(0, 0.2)) and its running
mean and variance are calibrated on a random batch pushed through the network being built, so activations stay O(1)
at any depth (outputs have a mean magnitude of about 0.3 to 2). BatchNorm is then folded numerically into the
preceding convolution's weight and a bias; the graph has no ``batch_norm``. ``numpy.random.default_rng([seed, i])``
draws layer ``i``, and calibration runs at a fixed size, so a seed gives the same weights at every batch and image
size. ``reference_outputs`` runs the same network in numpy (float64), an independent check of compiled numerics.

Op vocabulary (what ``search/graph.py`` pattern-matches)
--------------------------------------------------------
All ops sit in one dataflow block of ``main``; weights are float32 constants (``relax.const``, class
``tvm.ir.expr.Constant``); every tensor has a static shape; the layout is NCHW throughout. The Relax variable of each
layer's main op is named after the reference model's module (``layer1_0_conv2``, ``Mixed_5b_branch5x5_2``,
``denseblock2_denselayer3_conv1``, ``expand_conv0``, ...); the ops that follow it append ``_bias``, ``_add``,
``_relu`` or ``_relu6`` (``_silu``, ``_hardswish``, ... for the activations of item 9). The last op is bound directly
to the output variable ``gv`` (no alias binding); for SSD ``gv`` is the output tuple.

1. Convolution unit, in this order:

   - ``R.nn.conv2d(x, W)``: W a constant (O, I/groups, KH, KW); attributes ``strides`` (sh, sw), ``padding``
     (top, left, bottom, right), ``dilation`` (1, 1), ``groups`` 1, or I = O = groups for depthwise (MobileNetV2),
     ``data_layout="NCHW"``, ``kernel_layout="OIHW"``, ``out_layout="NCHW"``, ``out_dtype`` unset (float32).
   - ``R.add(conv, b)``: b a constant of shape (1, O, 1, 1). Always present (BatchNorm folds into it; a conv with
     neither BN nor bias gets zeros).
   - optionally ``R.add(prev, residual)``: a non-constant tensor of the same shape as the second argument (ResNet,
     MobileNetV2).
   - optionally ``R.nn.relu(prev)`` or ``R.clip(prev, 0.0, 6.0)`` (ReLU6, MobileNetV2; bounds are float64 PrimValues),
     or an activation of item 9.

2. BatchNorm that follows no convolution (DenseNet's pre-activation ``norm1``, the transitions' ``norm`` and
   ``norm5``): ``R.multiply(x, s)``, ``R.add(prev, t)`` with s, t constants (1, C, 1, 1), then ``R.nn.relu``. x is a
   concat or pool output.

3. Pooling, NCHW, ``dilation`` (1, 1), ``ceil_mode`` False: ``R.nn.max_pool2d(x, pool_size, strides, padding)``;
   ``R.nn.avg_pool2d(..., count_include_pad=True)`` (Inception branch pools 3/1/1, DenseNet transitions 2/2/0);
   ``R.nn.adaptive_avg_pool2d(x, output_size=[1, 1])`` (global pooling before the classifier).

4. ``R.concat([...], axis=1)``: channels of NCHW tensors (Inception, DenseNet) or features of 2-D (N, K) tensors
   (SSD's flattened predictions). A concat can feed another concat (Inception-E's split branches).

5. ``R.reshape(x, (N, K))`` with a static shape: flattening (N, C, 1, 1) after global pooling, VGG's (N, 512, 7, 7),
   and SSD's (N, H, W, C) prediction maps; SSD's final reshapes to (N, A, 21) and (N, A, 4).

6. Dense: ``R.matmul(x, W)`` with x (N, IN) and W a constant (IN, OUT) (i.e. the transposed PyTorch weight), then
   ``R.add(prev, b)`` with b a constant (1, OUT), then optionally ``R.nn.relu`` (VGG's hidden layers).
   ``R.nn.linear`` is not used.

7. ``R.permute_dims(x, axes=[0, 2, 3, 1])``: SSD's prediction maps before flattening.

8. The output: one tensor, or ``R.Tuple`` of two tensors for ``ssd_resnet50_512``.

9. EfficientNet's and MobileNetV3's activations, in the forms TVM's ONNX frontend imports (``activations.py``):
   SiLU ``R.nn.silu(x)``; ``R.sigmoid(x)``; HardSwish ``R.multiply(x, R.divide(R.clip(R.add(x, 3), 0, 6), 6))``;
   HardSigmoid ``R.clip(R.add(R.multiply(1/6, x), 0.5), 0, 1)`` (PyTorch's ``relu6(x + 3) / 6``); constants are
   float32 scalars of shape (), these clips' bounds int64 PrimValues. Squeeze-and-excitation: global pooling, a 1x1
   conv (item 1, a random bias, no BatchNorm) + ReLU or SiLU, a 1x1 conv + sigmoid or HardSigmoid, then
   ``R.multiply(x, gate)`` with gate (N, C, 1, 1). MobileNetV3's first dense layer is followed by HardSwish.

10. ConvNeXt and YOLOv8 add: ``R.nn.silu`` after a conv's bias add (``_silu``) and ``R.nn.gelu`` after a dense layer's
    (``_gelu``); ``R.nn.layer_norm`` over the last axis with constant gamma and beta, on NHWC tensors between
    ``R.permute_dims`` to and from NCHW, or on 2-D (N*H*W, C) rows that ``R.reshape`` makes of them (ConvNeXt's
    Linears are the dense layers of item 6 on those rows); a per-channel ``R.multiply`` by a (1, C, 1, 1) constant
    (the layer scale); ``R.add`` of two activations after an activation (residuals); ``R.strided_slice`` on one axis;
    ``R.image.resize2d`` nearest (asymmetric, floor) in NCHW; ``R.nn.softmax`` (axis 1 of YOLOv8's DFL), ``R.sigmoid``,
    ``R.subtract`` / ``R.add`` / ``R.multiply`` with constants of any broadcastable shape (box decoding), and
    ``R.concat`` on axis 2 of (N, C, A) tensors.

ONNX files go through ``tvm.relax.frontend.onnx.from_onnx`` on the input shapes the user binds and are then rewritten
into the same vocabulary where it has a form (see ``onnx/``): BatchNorm and constant scales fold into convolutions,
every conv and dense gets its bias add, a single input is renamed ``data`` (several keep their names), other variables
are named ``conv0``, ``conv0_bias``, ``relu3``, ... Differences from zoo modules: a conv may carry a dilation other
than 1 if the file has one, any op may be followed by the per-channel ``R.multiply`` / ``R.add`` of item 2 (a
BatchNorm or Mul/Add by a per-channel constant that could not be folded into a preceding conv), and every operator
the vocabulary has no form for (sigmoid, softmax, resize, conv2d_transpose, ``call_tir`` of the PrimFuncs the
frontend lowered something to, which are copied into the module, ...) stays as the frontend emitted it; graph
extraction makes those fixed ops.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from search.errors import SearchError
from search.relax_exprs import static_shape
from search.zoo import (
    convnext,
    densenet,
    efficientnet,
    inception,
    mobilenet,
    mobilenet_v3,
    resnet,
    ssd,
    transformer,
    vgg,
    yolov8,
)
from search.zoo.shapes import MAX_INPUT_ELEMENTS, InputShape, ShapesLike, check_input_size, input_shapes


@dataclass(frozen=True)
class ModelSpec:
    """A zoo entry: its builder, default and smallest input size, and what it takes.

    An ``image`` model's builder is ``builder(batch=, image_size=, seed=)`` and takes (batch, 3, S, S) images; a
    ``tokens`` model's is ``builder(batch=, seq_len=, seed=)`` and takes int64 (batch, S) ``input_ids`` and
    ``token_type_ids``, S at most ``max_size``. Either builder's ``build(..., references=)`` also returns the numpy
    outputs of reference inputs (an array for one input, a tuple of arrays for several).
    """

    builder: Callable[..., tvm.IRModule]
    image_size: int
    min_image_size: int
    description: str
    inputs: str = "image"
    max_size: int | None = None

    @property
    def size_name(self) -> str:
        """What the size is: ``image_size`` or ``seq_len``."""
        return "seq_len" if self.inputs == "tokens" else "image_size"

    def input_dims(self, batch: int, size: int) -> tuple[int, ...]:
        """The shape of (each of) its inputs."""
        return (batch, size) if self.inputs == "tokens" else (batch, 3, size, size)

    def build(self, *, batch: int, size: int, seed: int, references=()):
        """``(module, reference outputs)``."""
        return self.builder.build(batch=batch, seed=seed, references=references, **{self.size_name: size})


@dataclass(frozen=True)
class ModelStats:
    """Counts of conv2d calls, dense calls (matmul by a constant weight) and matmul calls of two activations
    (attention), and their total GFLOPs (2 x multiply-accumulates)."""

    conv2d: int
    dense: int
    gflops: float
    matmul: int = 0


MODELS: dict[str, ModelSpec] = {
    "resnet18": ModelSpec(resnet.resnet18, 224, 32, "ResNet-18 (torchvision), basic blocks"),
    "resnet50": ModelSpec(resnet.resnet50, 224, 32, "ResNet-50 v1.5 (torchvision), bottleneck blocks"),
    "vgg19_bn": ModelSpec(vgg.vgg19_bn, 224, 32, "VGG-19 with BatchNorm (torchvision), 3 dense layers"),
    "inception_v3": ModelSpec(inception.inception_v3, 299, 75, "Inception-v3 (torchvision), no aux head"),
    "densenet121": ModelSpec(densenet.densenet121, 224, 32, "DenseNet-121 (torchvision), growth 32"),
    "densenet201": ModelSpec(densenet.densenet201, 224, 32, "DenseNet-201 (torchvision), growth 32"),
    "mobilenet_v2": ModelSpec(mobilenet.mobilenet_v2, 224, 32, "MobileNetV2 (torchvision), depthwise, ReLU6"),
    "efficientnet_b0": ModelSpec(efficientnet.efficientnet_b0, 224, 32,
                                 "EfficientNet-B0 (torchvision), MBConv with squeeze-and-excitation, SiLU"),
    "mobilenet_v3_large": ModelSpec(mobilenet_v3.mobilenet_v3_large, 224, 32,
                                    "MobileNetV3-Large (torchvision), HardSwish, squeeze-and-excitation"),
    "ssd_resnet50_512": ModelSpec(
        ssd.ssd_resnet50_512, 512, 32, "SSD-512, ResNet-50 v1 backbone (GluonCV, VOC); class+box heads, no NMS"
    ),
    "convnext_tiny": ModelSpec(convnext.convnext_tiny, 224, 32, "ConvNeXt-T (torchvision), 7x7 depthwise, LayerNorm, "
                               "GELU"),
    "yolov8n": ModelSpec(yolov8.yolov8n, 640, 32, "YOLOv8n (Ultralytics, 80 classes), decoded boxes, no NMS"),
    "yolov8s": ModelSpec(yolov8.yolov8s, 640, 32, "YOLOv8s (Ultralytics, 80 classes), decoded boxes, no NMS"),
    "bert_base": ModelSpec(transformer.bert_base, 128, 1, "BERT-base (12 layers, 768 hidden, 12 heads), no pooler",
                           inputs="tokens", max_size=transformer.bert_base.max_positions),
    "bert_large": ModelSpec(transformer.bert_large, 128, 1, "BERT-large (24 layers, 1024 hidden, 16 heads)",
                            inputs="tokens", max_size=transformer.bert_large.max_positions),
    "bert_small": ModelSpec(transformer.bert_small, 16, 1, "a 2-layer BERT (64 hidden, 4 heads, 1000 tokens) for tests",
                            inputs="tokens", max_size=transformer.bert_small.max_positions),
    "vit_b16": ModelSpec(transformer.vit_b16, 224, 16, "ViT-B/16 (12 layers, 768 hidden, 12 heads, 16x16 patches)"),
    "vit_small": ModelSpec(transformer.vit_small, 32, 16, "a 2-layer ViT (64 hidden, 4 heads, 16x16 patches, 10 "
                           "classes) for tests"),
}


def is_transformer(name: str) -> bool:
    """Whether ``name`` is one of the zoo's transformers."""
    return name in MODELS and isinstance(MODELS[name].builder, transformer.Bert | transformer.ViT)


def _spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise SearchError(f"unknown model {name!r}; the zoo has {', '.join(MODELS)} (or give a path to an .onnx file)")
    return MODELS[name]


def _check_sizes(name: str, spec: ModelSpec, batch: int, size: int) -> None:
    if not isinstance(batch, numbers.Integral) or isinstance(batch, bool) or batch < 1:
        raise SearchError(f"{name}: batch must be a positive integer, got {batch!r}")
    what = "the sequence length (image_size)" if spec.inputs == "tokens" else "image_size"
    top = "" if spec.max_size is None else f" and <= {spec.max_size}"
    if (not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < spec.min_image_size
            or (spec.max_size is not None and size > spec.max_size)):
        raise SearchError(f"{name}: {what} must be an integer >= {spec.min_image_size}{top}, got {size!r}")
    dims = spec.input_dims(batch, size)
    check_input_size(dims, f"{name}'s input {'x'.join(str(d) for d in dims)}")


def _check_seed(seed: object) -> int:
    """``seed`` if it is an integer from 0 to 2**63 - 1 (what seeds the weights and inputs); ``SearchError``
    otherwise."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise SearchError(f"seed must be an integer from 0 to 2**63 - 1, got {seed!r}")
    return int(seed)


def load_model(name_or_path: str, *, batch: int | None = None, image_size: int | None = None, seed: int = 0,
               input_shape: ShapesLike = None) -> tvm.IRModule:
    """A zoo network by name, or an ONNX file by path.

    Parameters
    ----------
    name_or_path : str
        A key of ``MODELS``, or a path ending in ``.onnx``.
    batch, image_size : int, optional
        Input shape (batch, 3, image_size, image_size); default batch 1 and the model's own size. For an ONNX file
        they are shorthand for its one (N, C, H, W) input: a static N, H or W must equal them, a dynamic one is
        bound to them (see ``search.zoo.onnx.inputs``).
    seed : int
        Seed of the random weights, from 0 to 2**63 - 1 (ignored for ONNX files, which carry their own).
    input_shape : str, InputShape or a sequence of them, optional
        The input shapes, as ``--input-shape`` takes them: ``"1,3,640,640"`` for the only input or
        ``"NAME=1,3,640,640"`` per input. A zoo model takes one shape ``N,3,S,S`` (batch N, image size S); an ONNX
        file's static dimensions must agree with it and its dynamic ones are bound to it. Not together with
        ``batch`` / ``image_size``.

    Raises
    ------
    SearchError
        Unknown name, size or seed out of range (an input of more than ``MAX_INPUT_ELEMENTS``), a shape the model
        cannot take, an ONNX dimension left dynamic, or an ONNX file that cannot be converted.
    """
    name, seed, shapes, batch, image_size = _checked(name_or_path, batch, image_size, seed, input_shape)
    if name.lower().endswith(".onnx"):
        from search.zoo.onnx import load_onnx

        return load_onnx(name, batch=batch, image_size=image_size, input_shape=shapes)
    return MODELS[name].build(batch=batch, size=image_size, seed=seed)[0]


def check_model(name_or_path: str, *, batch: int | None = None, image_size: int | None = None, seed: int = 0,
                input_shape: ShapesLike = None) -> None:
    """Raise what ``load_model`` would for these arguments before it builds or reads anything (an unknown name, a
    seed, size or shape out of range), so that a caller can refuse them before work of its own (opening a cost
    cache, joining a cluster); an ONNX file is checked when it is loaded."""
    _checked(name_or_path, batch, image_size, seed, input_shape)


def _checked(name_or_path: str, batch: int | None, image_size: int | None, seed: int,
             input_shape: ShapesLike) -> tuple[str, int, tuple[InputShape, ...], int | None, int | None]:
    """(name, seed, shapes, batch, image size) checked as ``load_model`` takes them; for a zoo model, batch and
    image size with their defaults filled in."""
    name = str(name_or_path)
    seed = _check_seed(seed)
    shapes = input_shapes(input_shape)
    if shapes and (batch is not None or image_size is not None):
        raise SearchError(f"{name}: input_shape (--input-shape) and batch / image_size (--batch / --image-size) "
                          "both given; give one of them")
    if name.lower().endswith(".onnx"):  # its file is read, and checked, when it is loaded
        return name, seed, shapes, batch, image_size
    spec = _spec(name)
    if shapes:
        batch, image_size = _zoo_shape(name, spec, shapes)
    size = spec.image_size if image_size is None else image_size
    batch = 1 if batch is None else batch
    _check_sizes(name, spec, batch, size)
    return name, seed, shapes, int(batch), int(size)


def _zoo_shape(name: str, spec: ModelSpec, shapes: tuple[InputShape, ...]) -> tuple[int, int]:
    """(batch, size) of a zoo model's one input shape: N,3,S,S for images, N,S for tokens (both inputs)."""
    shape = shapes[0] if len(shapes) == 1 else None
    given = " ".join(str(s) for s in shapes)
    if spec.inputs == "tokens":
        dims = shape.dims if shape is not None and shape.name in (None, "input_ids") else ()
        if len(dims) != 2:
            raise SearchError(f"{name}: takes one input shape N,S (batch N, S tokens, for input_ids and "
                              f"token_type_ids), got {given}")
        return dims[0], dims[1]
    dims = shape.dims if shape is not None and shape.name in (None, "data") else ()
    if len(dims) != 4 or dims[1] != 3 or dims[2] != dims[3]:
        raise SearchError(f"{name}: a zoo model takes one input shape N,3,S,S (batch N, S x S images), got {given}")
    return dims[0], dims[2]


def reference_outputs(name: str, *inputs: np.ndarray, seed: int = 0) -> np.ndarray | tuple[np.ndarray, ...]:
    """The zoo network ``name`` (weights of ``seed``) evaluated in float64 numpy on ``inputs``: images (N, 3, H, H),
    or a transformer's ``input_ids`` and ``token_type_ids`` (N, S).

    Independent of TVM: it checks compiled or exported modules from ``load_model(name, batch=N, image_size=H,
    seed=seed)``, which hold the same weights rounded to float32. Compiled stock TVM agrees with it to a relative
    error (L2) of about 2e-6.
    """
    spec = _spec(name)
    wanted = 2 if spec.inputs == "tokens" else 1
    if len(inputs) != wanted:
        raise SearchError(f"{name}: reference takes {wanted} input(s), got {len(inputs)}")
    shape = tuple(np.shape(inputs[0]))
    if spec.inputs == "tokens":
        if len(shape) != 2:
            raise SearchError(f"{name}: reference inputs must be (batch, tokens), got {shape}")
        n, size = shape
    else:
        if len(shape) != 4 or shape[2] != shape[3]:
            raise SearchError(f"{name}: reference inputs must be square images (N, 3, H, H), got {shape}")
        n, size = shape[0], shape[2]
    _check_sizes(name, spec, n, size)
    _, outputs = spec.build(batch=n, size=size, seed=seed, references=[inputs if wanted > 1 else inputs[0]])
    return outputs[0]


def model_stats(mod: tvm.IRModule) -> ModelStats:
    """Count ``relax.nn.conv2d`` and ``relax.matmul`` calls (by a constant: dense, else matmul) in every Relax
    function of ``mod`` and sum their FLOPs.

    conv2d: 2 * N * OC * OH * OW * (IC / groups) * KH * KW, read through the call's data, kernel and output
    layouts (blocked layouts such as NCHW8c included). matmul: 2 * (output elements) * (reduction length).
    """
    conv = dense = matmul = 0
    flops = 0.0
    for func in mod.functions.values():
        if not isinstance(func, relax.Function):
            continue
        for block in func.body.blocks:
            for binding in block.bindings:
                call = binding.value
                if not isinstance(call, relax.Call) or not hasattr(call.op, "name"):
                    continue
                if call.op.name == "relax.nn.conv2d":
                    conv += 1
                    flops += _conv2d_flops(call, binding.var)
                elif call.op.name == "relax.matmul":
                    if isinstance(call.args[1], tvm.ir.expr.Constant):
                        dense += 1
                    else:
                        matmul += 1
                    out = static_shape(binding.var)
                    k = static_shape(call.args[0])[-1]
                    flops += 2.0 * _prod(out) * k
    return ModelStats(conv2d=conv, dense=dense, gflops=flops / 1e9, matmul=matmul)


def _prod(values) -> int:
    result = 1
    for v in values:
        result *= int(v)
    return result


def _axes(layout: str, shape: tuple[int, ...]) -> dict[str, int]:
    """Extent of each logical axis (upper-case letter) of ``shape`` in ``layout``, e.g. OIHW16i16o."""
    letters = [c for c in layout if c.isalpha()]
    extents: dict[str, int] = {}
    for letter, dim in zip(letters, shape):
        extents[letter.upper()] = extents.get(letter.upper(), 1) * dim
    return extents


def _conv2d_flops(call, out_var) -> float:
    attrs = call.attrs
    kernel = _axes(str(attrs.kernel_layout), static_shape(call.args[1]))
    out_layout = str(attrs.out_layout) or str(attrs.data_layout)
    out = _axes(out_layout, static_shape(out_var))
    return 2.0 * out["N"] * out["C"] * out["H"] * out["W"] * kernel["I"] * kernel["H"] * kernel["W"]


def describe(name_or_path: str, input_shape: ShapesLike = None) -> tuple[dict[str, tuple[int, ...]], ModelStats]:
    """(input name -> shape, stats) of a zoo model at batch 1 and its default size, or of an ONNX file, or of
    either at ``input_shape``."""
    mod = load_model(name_or_path, input_shape=input_shape)
    return {p.name: static_shape(p) for p in mod["main"].params}, model_stats(mod)


__all__ = ["MAX_INPUT_ELEMENTS", "MODELS", "InputShape", "ModelSpec", "ModelStats", "check_model", "describe",
           "input_shapes", "is_transformer", "load_model", "model_stats", "reference_outputs"]
