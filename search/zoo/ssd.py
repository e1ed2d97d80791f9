"""SSD-512 with a ResNet-50 v1 backbone: GluonCV's ``ssd_512_resnet50_v1_voc``, the network of TVM's graph-tuner RFC.

- Backbone: gluon ``resnet50_v1`` (stride in each downsampling bottleneck's first 1x1 conv), 53 convs, features
  taken after stage 3 (1024 channels, stride 16) and stage 4 (2048 channels, stride 32).
- ``FeatureExpander`` with filters (512, 512, 256, 256), ``reduce_ratio`` 1.0 and ``min_depth`` 128: four extra
  stages of conv1x1 + BN + ReLU then conv3x3 stride 2 + BN + ReLU, 8 convs (``expand_trans_conv{i}``,
  ``expand_conv{i}``).
- On each of the 6 scales a 3x3 class predictor (anchors x 21 channels: 20 VOC classes + background) and a 3x3 box
  predictor (anchors x 4), both with their own bias and no BN, 12 convs; anchors per position (4, 6, 6, 6, 4, 4).

73 conv2d in all, no dense layer. Anchor generation, box decoding, softmax and NMS are left out. ``main`` returns the
tuple ``(class_predictions, box_predictions)`` of shapes (N, A, 21) and (N, A, 4), as GluonCV's ``hybrid_forward``
builds them before decoding: each prediction map goes through ``R.permute_dims(axes=[0, 2, 3, 1])`` and
``R.reshape`` to (N, H*W*channels), the six are joined by ``R.concat(axis=1)`` and reshaped to (N, A, 21 or 4).
A = 6132 anchors at 512x512 (scales 32, 16, 8, 4, 2, 1).
"""

from __future__ import annotations

from search.zoo.layers import Net, Network, Tensor
from search.zoo.resnet import resnet_stages

NUM_CLASSES = 20  # Pascal VOC
EXTRA_FILTERS = (512, 512, 256, 256)
ANCHORS_PER_POSITION = (4, 6, 6, 6, 4, 4)
MIN_DEPTH, REDUCE_RATIO = 128, 1.0


def _predictions(net: Net, features: list[Tensor], per_anchor: int, kind: str) -> Tensor:
    flat = []
    for i, (feature, anchors) in enumerate(zip(features, ANCHORS_PER_POSITION)):
        name = f"{kind}_predictor{i}"
        p = net.conv(feature, anchors * per_anchor, 3, padding=1, bn=False, bias=True, act=None, name=name)
        p = net.permute(p, (0, 2, 3, 1), name=f"{name}_transpose")
        flat.append(net.flatten(p, name=f"{name}_flatten"))
    joined = net.concat(flat, name=f"{kind}_preds")
    return net.reshape(joined, (0, joined.shape[1] // per_anchor, per_anchor), name=f"{kind}_preds_reshape")


def _ssd_512_resnet50(net: Net, x: Tensor) -> tuple[Tensor, Tensor]:
    stages = resnet_stages(net, x, (3, 4, 6, 3), bottleneck=True, stride_in_1x1=True)
    features = [stages[2], stages[3]]
    y = stages[3]
    for i, filters in enumerate(EXTRA_FILTERS):
        trans = max(MIN_DEPTH, int(round(filters * REDUCE_RATIO)))
        y = net.conv(y, trans, 1, name=f"expand_trans_conv{i}")
        y = net.conv(y, filters, 3, stride=2, padding=1, name=f"expand_conv{i}")
        features.append(y)
    return _predictions(net, features, NUM_CLASSES + 1, "class"), _predictions(net, features, 4, "box")


ssd_resnet50_512 = Network(_ssd_512_resnet50, calibration_size=256)
