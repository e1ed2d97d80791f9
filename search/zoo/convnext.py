"""ConvNeXt-T: torchvision's ``convnext_tiny`` (widths 96, 192, 384, 768; 3, 3, 9, 3 blocks).

- Stem ``features_0``: a 4x4 stride-4 conv with bias, then LayerNorm2d.
- Block ``features_{s}_{i}``: a 7x7 depthwise conv with bias (``block_0``), ``R.permute_dims`` to NHWC (``block_1``)
  and ``R.reshape`` to (N*H*W, C) rows, LayerNorm over channels (``block_2``), Linear to 4C with GELU (``block_3``, the
  erf form), Linear back to C (``block_5``), reshape to NHWC and permute back to NCHW (``block_6``), the layer scale
  (``layer_scale``: a multiply by a (1, C, 1, 1) constant) and the residual add (``_add``).
- Downsampling ``features_{2,4,6}``: LayerNorm2d, then a 2x2 stride-2 conv with bias.
- Head: global average pooling, flattening, LayerNorm (``classifier_0``), Linear to 1000 classes (``classifier_2``).

LayerNorm2d is ``R.permute_dims`` to NHWC, ``R.nn.layer_norm`` over the last axis, ``R.permute_dims`` back, as
torchvision computes it and its ONNX export presents it; the head's LayerNorm runs on the flattened (N, C) features
(torchvision normalises the (N, C, 1, 1) pooled map before flattening: the same numbers). The block's rows are 2-D, as
the transformers' tokens are, so that both Linears are ``dense`` ops of tessera's graph (bias and GELU fused) and the
LayerNorm a ``layer_norm`` op: a ``matmul`` of the 4-D NHWC tensor, as the ONNX export writes it, would be read as an
NCHW activation. 22 conv2d, 37 dense; 4.5 GMACs at 224x224.

Convolutions and Linears have random biases and no BatchNorm; layer scales are drawn in [0.1, 0.5] (torchvision
initialises them to 1e-6 and training grows them), which keeps the residual stream O(1) through the 18 blocks.
"""

from __future__ import annotations

from tvm import relax

from search.zoo.layers import Net, Network, Tensor

WIDTHS = (96, 192, 384, 768)
DEPTHS = (3, 3, 9, 3)
CLASSES = 1000
EPS = 1e-6
LAYER_SCALE = (0.1, 0.5)


def layer_norm_2d(net: Net, x: Tensor, *, name: str) -> Tensor:
    """LayerNorm over the channels of an NCHW tensor, in NHWC between two permutes."""
    x = net.permute(x, (0, 2, 3, 1), name=f"{name}_nhwc")
    x = net.layer_norm(x, name=name, eps=EPS)
    return net.permute(x, (0, 3, 1, 2), name=f"{name}_nchw")


def _block(net: Net, x: Tensor, *, name: str) -> Tensor:
    c = x.channels
    y = net.conv(x, c, 7, padding=3, groups=c, bn=False, bias=True, act=None, name=f"{name}_block_0")
    nhwc = net.permute(y, (0, 2, 3, 1), name=f"{name}_block_1")
    n, h, w, _ = nhwc.shape
    rows = net.apply(relax.op.reshape(nhwc.var, (n * h * w, c)), f"{name}_block_1_rows", lambda s: s.reshape(-1, c),
                     nhwc)
    rows = net.layer_norm(rows, name=f"{name}_block_2", eps=EPS)
    rows = net.dense(rows, 4 * c, act="gelu", name=f"{name}_block_3")
    rows = net.dense(rows, c, name=f"{name}_block_5")
    back = net.apply(relax.op.reshape(rows.var, nhwc.shape), f"{name}_block_6_nhwc",
                     lambda s, like: s.reshape(like.shape), rows, nhwc)
    y = net.permute(back, (0, 3, 1, 2), name=f"{name}_block_6")
    y = net.channel_scale(y, *LAYER_SCALE, name=f"{name}_layer_scale")
    return net.add(y, x, name=f"{name}_add")


def _convnext_tiny(net: Net, x: Tensor) -> Tensor:
    x = net.conv(x, WIDTHS[0], 4, stride=4, bn=False, bias=True, act=None, name="features_0_0")
    x = layer_norm_2d(net, x, name="features_0_1")
    for stage, (width, depth) in enumerate(zip(WIDTHS, DEPTHS)):
        if stage:
            x = layer_norm_2d(net, x, name=f"features_{2 * stage}_0")
            x = net.conv(x, width, 2, stride=2, bn=False, bias=True, act=None, name=f"features_{2 * stage}_1")
        for i in range(depth):
            x = _block(net, x, name=f"features_{2 * stage + 1}_{i}")
    x = net.flatten(net.global_avg_pool(x, name="avgpool"), name="classifier_1")
    x = net.layer_norm(x, name="classifier_0", eps=EPS)
    return net.dense(x, CLASSES, name="classifier_2")


convnext_tiny = Network(_convnext_tiny, calibration_size=32)
