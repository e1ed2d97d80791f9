"""ResNet-18 and ResNet-50 as in torchvision (v1.5: a bottleneck strides in its 3x3 conv), and the ResNet-50 v1
backbone of GluonCV (stride in the first 1x1 conv) used by ``ssd.py``.

Conv names follow torchvision's modules: ``conv1``, ``layer{s}_{b}_conv{i}``, ``layer{s}_{b}_downsample``, ``fc``.
"""

from __future__ import annotations

from search.zoo.layers import Net, Network, Tensor


def _basic_block(net: Net, x: Tensor, planes: int, stride: int, name: str) -> Tensor:
    identity = x
    if stride != 1 or x.channels != planes:
        identity = net.conv(x, planes, 1, stride=stride, act=None, name=f"{name}_downsample")
    out = net.conv(x, planes, 3, stride=stride, padding=1, name=f"{name}_conv1")
    return net.conv(out, planes, 3, padding=1, residual=identity, name=f"{name}_conv2")


def _bottleneck(net: Net, x: Tensor, planes: int, stride: int, name: str, stride_in_1x1: bool) -> Tensor:
    width, out_channels = planes, planes * 4
    identity = x
    if stride != 1 or x.channels != out_channels:
        identity = net.conv(x, out_channels, 1, stride=stride, act=None, name=f"{name}_downsample")
    s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
    out = net.conv(x, width, 1, stride=s1, name=f"{name}_conv1")
    out = net.conv(out, width, 3, stride=s3, padding=1, name=f"{name}_conv2")
    return net.conv(out, out_channels, 1, residual=identity, name=f"{name}_conv3")


def resnet_stages(
    net: Net, x: Tensor, layers: tuple[int, ...], *, bottleneck: bool, stride_in_1x1: bool = False
) -> list[Tensor]:
    """Stem and the four stages; returns each stage's output (strides 4, 8, 16 and 32)."""
    x = net.conv(x, 64, 7, stride=2, padding=3, name="conv1")
    x = net.max_pool(x, 3, 2, 1, name="maxpool")
    outputs = []
    for stage, (blocks, planes) in enumerate(zip(layers, (64, 128, 256, 512)), start=1):
        for b in range(blocks):
            stride = 2 if stage > 1 and b == 0 else 1
            name = f"layer{stage}_{b}"
            if bottleneck:
                x = _bottleneck(net, x, planes, stride, name, stride_in_1x1)
            else:
                x = _basic_block(net, x, planes, stride, name)
        outputs.append(x)
    return outputs


def _classifier(layers: tuple[int, ...], bottleneck: bool):
    def body(net: Net, x: Tensor) -> Tensor:
        x = resnet_stages(net, x, layers, bottleneck=bottleneck)[-1]
        x = net.global_avg_pool(x, name="avgpool")
        x = net.flatten(x, name="flatten")
        return net.dense(x, 1000, name="fc")

    return body


resnet18 = Network(_classifier((2, 2, 2, 2), bottleneck=False), calibration_size=128)
resnet50 = Network(_classifier((3, 4, 6, 3), bottleneck=True), calibration_size=128)
