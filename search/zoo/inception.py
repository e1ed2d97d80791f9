"""Inception-v3 (torchvision ``inception_v3`` without the auxiliary head, ``transform_input=False``).

Every ``BasicConv2d`` is a conv with BatchNorm (eps 0.001) and ReLU; branch pools are ``avg_pool2d(3, 1, 1)`` counting
padding, as ``F.avg_pool2d`` does by default. Conv names follow torchvision's modules, e.g. ``Mixed_5b_branch5x5_2``.
InceptionE concatenates its split 1x3/3x1 branches first and then all branches, as torchvision does.
"""

from __future__ import annotations

from search.zoo.layers import Net, Network, Tensor


def _inception_a(net: Net, x: Tensor, pool_features: int, name: str) -> Tensor:
    b1 = net.conv(x, 64, 1, name=f"{name}_branch1x1")
    b5 = net.conv(x, 48, 1, name=f"{name}_branch5x5_1")
    b5 = net.conv(b5, 64, 5, padding=2, name=f"{name}_branch5x5_2")
    b3 = net.conv(x, 64, 1, name=f"{name}_branch3x3dbl_1")
    b3 = net.conv(b3, 96, 3, padding=1, name=f"{name}_branch3x3dbl_2")
    b3 = net.conv(b3, 96, 3, padding=1, name=f"{name}_branch3x3dbl_3")
    bp = net.avg_pool(x, 3, 1, 1, name=f"{name}_pool")
    bp = net.conv(bp, pool_features, 1, name=f"{name}_branch_pool")
    return net.concat([b1, b5, b3, bp], name=name)


def _inception_b(net: Net, x: Tensor, name: str) -> Tensor:
    b3 = net.conv(x, 384, 3, stride=2, name=f"{name}_branch3x3")
    bd = net.conv(x, 64, 1, name=f"{name}_branch3x3dbl_1")
    bd = net.conv(bd, 96, 3, padding=1, name=f"{name}_branch3x3dbl_2")
    bd = net.conv(bd, 96, 3, stride=2, name=f"{name}_branch3x3dbl_3")
    bp = net.max_pool(x, 3, 2, name=f"{name}_pool")
    return net.concat([b3, bd, bp], name=name)


def _inception_c(net: Net, x: Tensor, c7: int, name: str) -> Tensor:
    b1 = net.conv(x, 192, 1, name=f"{name}_branch1x1")
    b7 = net.conv(x, c7, 1, name=f"{name}_branch7x7_1")
    b7 = net.conv(b7, c7, (1, 7), padding=(0, 3), name=f"{name}_branch7x7_2")
    b7 = net.conv(b7, 192, (7, 1), padding=(3, 0), name=f"{name}_branch7x7_3")
    bd = net.conv(x, c7, 1, name=f"{name}_branch7x7dbl_1")
    bd = net.conv(bd, c7, (7, 1), padding=(3, 0), name=f"{name}_branch7x7dbl_2")
    bd = net.conv(bd, c7, (1, 7), padding=(0, 3), name=f"{name}_branch7x7dbl_3")
    bd = net.conv(bd, c7, (7, 1), padding=(3, 0), name=f"{name}_branch7x7dbl_4")
    bd = net.conv(bd, 192, (1, 7), padding=(0, 3), name=f"{name}_branch7x7dbl_5")
    bp = net.avg_pool(x, 3, 1, 1, name=f"{name}_pool")
    bp = net.conv(bp, 192, 1, name=f"{name}_branch_pool")
    return net.concat([b1, b7, bd, bp], name=name)


def _inception_d(net: Net, x: Tensor, name: str) -> Tensor:
    b3 = net.conv(x, 192, 1, name=f"{name}_branch3x3_1")
    b3 = net.conv(b3, 320, 3, stride=2, name=f"{name}_branch3x3_2")
    b7 = net.conv(x, 192, 1, name=f"{name}_branch7x7x3_1")
    b7 = net.conv(b7, 192, (1, 7), padding=(0, 3), name=f"{name}_branch7x7x3_2")
    b7 = net.conv(b7, 192, (7, 1), padding=(3, 0), name=f"{name}_branch7x7x3_3")
    b7 = net.conv(b7, 192, 3, stride=2, name=f"{name}_branch7x7x3_4")
    bp = net.max_pool(x, 3, 2, name=f"{name}_pool")
    return net.concat([b3, b7, bp], name=name)


def _inception_e(net: Net, x: Tensor, name: str) -> Tensor:
    b1 = net.conv(x, 320, 1, name=f"{name}_branch1x1")
    b3 = net.conv(x, 384, 1, name=f"{name}_branch3x3_1")
    b3a = net.conv(b3, 384, (1, 3), padding=(0, 1), name=f"{name}_branch3x3_2a")
    b3b = net.conv(b3, 384, (3, 1), padding=(1, 0), name=f"{name}_branch3x3_2b")
    b3 = net.concat([b3a, b3b], name=f"{name}_branch3x3")
    bd = net.conv(x, 448, 1, name=f"{name}_branch3x3dbl_1")
    bd = net.conv(bd, 384, 3, padding=1, name=f"{name}_branch3x3dbl_2")
    bda = net.conv(bd, 384, (1, 3), padding=(0, 1), name=f"{name}_branch3x3dbl_3a")
    bdb = net.conv(bd, 384, (3, 1), padding=(1, 0), name=f"{name}_branch3x3dbl_3b")
    bd = net.concat([bda, bdb], name=f"{name}_branch3x3dbl")
    bp = net.avg_pool(x, 3, 1, 1, name=f"{name}_pool")
    bp = net.conv(bp, 192, 1, name=f"{name}_branch_pool")
    return net.concat([b1, b3, bd, bp], name=name)


def _inception_v3(net: Net, x: Tensor) -> Tensor:
    x = net.conv(x, 32, 3, stride=2, name="Conv2d_1a_3x3")
    x = net.conv(x, 32, 3, name="Conv2d_2a_3x3")
    x = net.conv(x, 64, 3, padding=1, name="Conv2d_2b_3x3")
    x = net.max_pool(x, 3, 2, name="maxpool1")
    x = net.conv(x, 80, 1, name="Conv2d_3b_1x1")
    x = net.conv(x, 192, 3, name="Conv2d_4a_3x3")
    x = net.max_pool(x, 3, 2, name="maxpool2")
    x = _inception_a(net, x, 32, "Mixed_5b")
    x = _inception_a(net, x, 64, "Mixed_5c")
    x = _inception_a(net, x, 64, "Mixed_5d")
    x = _inception_b(net, x, "Mixed_6a")
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _inception_c(net, x, c7, name)
    x = _inception_d(net, x, "Mixed_7a")
    x = _inception_e(net, x, "Mixed_7b")
    x = _inception_e(net, x, "Mixed_7c")
    x = net.global_avg_pool(x, name="avgpool")
    x = net.flatten(x, name="flatten")
    return net.dense(x, 1000, name="fc")


# 139 is the smallest size whose last feature map is 3x3 (75 gives 1x1)
inception_v3 = Network(_inception_v3, calibration_size=139, bn_eps=1e-3)
