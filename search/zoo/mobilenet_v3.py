"""MobileNetV3-Large (torchvision ``mobilenet_v3_large``): inverted residual blocks with ReLU or HardSwish, some with
squeeze-and-excitation gated by HardSigmoid, and a two-layer classifier. Conv names follow ``features_{i}``, the
classifier's ``classifier_0`` and ``classifier_3``; dropout is left out. BatchNorm epsilon 1e-3.
"""

from __future__ import annotations

from search.zoo.inverted_residual import SqueezeExcite, inverted_residual
from search.zoo.layers import Net, Network, Tensor

# kernel k, expanded channels e, output channels c, squeeze-and-excitation, activation, stride s
BNECK_SETTING = (
    (3, 16, 16, False, "relu", 1),
    (3, 64, 24, False, "relu", 2),
    (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2),
    (5, 120, 40, True, "relu", 1),
    (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hardswish", 2),
    (3, 200, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 480, 112, True, "hardswish", 1),
    (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2),
    (5, 960, 160, True, "hardswish", 1),
    (5, 960, 160, True, "hardswish", 1),
)


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: ``value`` rounded to a multiple of ``divisor``, at most 10% below it."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _mobilenet_v3_large(net: Net, x: Tensor) -> Tensor:
    x = net.conv(x, 16, 3, stride=2, padding=1, act="hardswish", name="features_0")
    for index, (k, e, c, use_se, act, s) in enumerate(BNECK_SETTING, start=1):
        se = SqueezeExcite(make_divisible(e // 4), act="relu", gate="hardsigmoid") if use_se else None
        x = inverted_residual(net, x, c, hidden=e, kernel=k, stride=s, act=act, se=se, name=f"features_{index}")
    x = net.conv(x, 6 * x.channels, 1, act="hardswish", name=f"features_{len(BNECK_SETTING) + 1}")
    x = net.global_avg_pool(x, name="avgpool")
    x = net.flatten(x, name="flatten")
    x = net.dense(x, 1280, act="hardswish", name="classifier_0")
    return net.dense(x, 1000, name="classifier_3")


# Calibrated at 224, as EfficientNet-B0 is (see there).
mobilenet_v3_large = Network(_mobilenet_v3_large, calibration_size=224, bn_eps=1e-3)
