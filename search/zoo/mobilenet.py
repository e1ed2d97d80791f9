"""MobileNetV2 (torchvision ``mobilenet_v2``, width 1.0): inverted residual blocks with ReLU6 (``R.clip(x, 0, 6)``)
and depthwise 3x3 convolutions (``groups`` = channels). Conv names follow ``features_{i}``; dropout is left out.
"""

from __future__ import annotations

from search.zoo.inverted_residual import inverted_residual
from search.zoo.layers import Net, Network, Tensor

# expansion t, output channels c, repeats n, first stride s
INVERTED_RESIDUAL_SETTING = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _mobilenet_v2(net: Net, x: Tensor) -> Tensor:
    x = net.conv(x, 32, 3, stride=2, padding=1, act="relu6", name="features_0")
    index = 1
    for t, c, n, s in INVERTED_RESIDUAL_SETTING:
        for i in range(n):
            x = inverted_residual(net, x, c, hidden=x.channels * t, stride=s if i == 0 else 1, act="relu6",
                                  name=f"features_{index}")
            index += 1
    x = net.conv(x, 1280, 1, act="relu6", name=f"features_{index}")
    x = net.global_avg_pool(x, name="avgpool")
    x = net.flatten(x, name="flatten")
    return net.dense(x, 1000, name="classifier")


mobilenet_v2 = Network(_mobilenet_v2, calibration_size=128)
