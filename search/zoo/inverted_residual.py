"""The inverted residual block of MobileNetV2 and V3 and EfficientNet's MBConv, squeeze-and-excitation included."""

from __future__ import annotations

from dataclasses import dataclass

from search.zoo.layers import Net, Tensor


@dataclass(frozen=True)
class SqueezeExcite:
    """torchvision's ``SqueezeExcitation``: ``channels`` squeezed channels, ``act`` after the first 1x1 conv, ``gate``
    (``sigmoid`` or ``hardsigmoid``) after the second."""

    channels: int
    act: str
    gate: str


def squeeze_excite(net: Net, x: Tensor, se: SqueezeExcite, *, name: str) -> Tensor:
    """Global average pool, 1x1 conv with bias + ``se.act`` (``{name}_fc1``), 1x1 conv with bias back to x's channels
    + ``se.gate`` (``{name}_fc2``), then ``R.multiply(x, gate)`` (``name``)."""
    s = net.global_avg_pool(x, name=f"{name}_avgpool")
    s = net.conv(s, se.channels, 1, bn=False, bias=True, act=se.act, name=f"{name}_fc1")
    s = net.conv(s, x.channels, 1, bn=False, bias=True, act=se.gate, name=f"{name}_fc2")
    return net.multiply(x, s, name=name)


def inverted_residual(net: Net, x: Tensor, out_channels: int, *, hidden: int, act: str, name: str, kernel: int = 3,
                      stride: int = 1, se: SqueezeExcite | None = None) -> Tensor:
    """1x1 expansion to ``hidden`` channels + ``act`` (``{name}_expand``, left out when ``hidden`` is x's channel
    count), depthwise ``kernel`` x ``kernel`` conv + ``act`` (``{name}_dw``), optional squeeze-and-excitation
    (``{name}_se``), 1x1 projection without activation (``{name}_project``), plus x when stride and channels keep
    its shape."""
    residual = x if stride == 1 and x.channels == out_channels else None
    h = x
    if hidden != x.channels:
        h = net.conv(h, hidden, 1, act=act, name=f"{name}_expand")
    h = net.conv(h, hidden, kernel, stride=stride, padding=(kernel - 1) // 2, groups=hidden, act=act,
                 name=f"{name}_dw")
    if se is not None:
        h = squeeze_excite(net, h, se, name=f"{name}_se")
    return net.conv(h, out_channels, 1, act=None, residual=residual, name=f"{name}_project")
