"""EfficientNet-B0 (torchvision ``efficientnet_b0``): MBConv blocks (inverted residuals with squeeze-and-excitation)
and SiLU. Conv names follow ``features_{stage}_{block}``; dropout and stochastic depth (training only) are left out.
"""

from __future__ import annotations

from search.zoo.inverted_residual import SqueezeExcite, inverted_residual
from search.zoo.layers import Net, Network, Tensor

# expansion t, kernel k, first stride s, output channels c, repeats n
MBCONV_SETTING = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


def _efficientnet_b0(net: Net, x: Tensor) -> Tensor:
    x = net.conv(x, 32, 3, stride=2, padding=1, act="silu", name="features_0")
    for stage, (t, k, s, c, n) in enumerate(MBCONV_SETTING, start=1):
        for i in range(n):
            se = SqueezeExcite(max(1, x.channels // 4), act="silu", gate="sigmoid")
            x = inverted_residual(net, x, c, hidden=x.channels * t, kernel=k, stride=s if i == 0 else 1, act="silu",
                                  se=se, name=f"features_{stage}_{i}")
    x = net.conv(x, 4 * x.channels, 1, act="silu", name=f"features_{len(MBCONV_SETTING) + 1}")
    x = net.global_avg_pool(x, name="avgpool")
    x = net.flatten(x, name="flatten")
    return net.dense(x, 1000, name="classifier")


# Calibrated at 224 (7x7 last-stage maps): calibrated from 4x4 maps, the statistics of other images drifted through the
# gated blocks and their outputs grew to ~10.
efficientnet_b0 = Network(_efficientnet_b0, calibration_size=224)
