"""VGG-19 with BatchNorm (torchvision ``vgg19_bn``, configuration E).

torchvision pools the features adaptively to 7x7 before the classifier; at the default 224x224 input the map is
already 7x7 and that pooling is the identity, so it is left out. At other sizes the first dense layer takes the
flattened 512 x H/32 x W/32 map (the original fixed-size VGG behaviour) instead of resampling it to 7x7.
Dropout is the identity at inference and is left out.
"""

from __future__ import annotations

from search.zoo.layers import Net, Network, Tensor

# channels per conv, "M" for a 2x2 max pool (torchvision's cfgs["E"])
CONFIG_E = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")


def _vgg19_bn(net: Net, x: Tensor) -> Tensor:
    stage, index = 1, 1
    for item in CONFIG_E:
        if item == "M":
            x = net.max_pool(x, 2, 2, name=f"pool{stage}")
            stage, index = stage + 1, 1
        else:
            x = net.conv(x, item, 3, padding=1, name=f"conv{stage}_{index}")
            index += 1
    x = net.flatten(x, name="flatten")
    x = net.dense(x, 4096, act="relu", name="fc6")
    x = net.dense(x, 4096, act="relu", name="fc7")
    return net.dense(x, 1000, name="fc8")


vgg19_bn = Network(_vgg19_bn, calibration_size=64)
