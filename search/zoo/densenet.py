"""DenseNet-121 and DenseNet-201 (torchvision, growth rate 32, bottleneck width 4 x 32, 64 initial features).

DenseNet normalises before it convolves: each dense layer is BN-ReLU-conv1x1-BN-ReLU-conv3x3. The second BN follows
a convolution and is folded into it; the first acts on the concatenated features and is emitted as a per-channel
``R.multiply`` + ``R.add`` (constants of shape (1, C, 1, 1)) + ``R.nn.relu``, as are the transitions' BN and the
final ``norm5``. As in torchvision, every dense layer concatenates the block input and all earlier layers' outputs
(``torch.cat(inputs, 1)``), and the block output is the concatenation of all of them.
"""

from __future__ import annotations

from search.zoo.layers import Net, Network, Tensor

GROWTH, BOTTLENECK = 32, 4


def _dense_block(net: Net, x: Tensor, layers: int, name: str) -> Tensor:
    features = [x]
    for i in range(1, layers + 1):
        lname = f"{name}_denselayer{i}"
        h = net.concat(features, name=f"{lname}_cat")
        h = net.bn_act(h, name=f"{lname}_norm1")
        h = net.conv(h, BOTTLENECK * GROWTH, 1, name=f"{lname}_conv1")
        h = net.conv(h, GROWTH, 3, padding=1, bn=False, act=None, name=f"{lname}_conv2")
        features.append(h)
    return net.concat(features, name=name)


def _transition(net: Net, x: Tensor, name: str) -> Tensor:
    h = net.bn_act(x, name=f"{name}_norm")
    h = net.conv(h, x.channels // 2, 1, bn=False, act=None, name=f"{name}_conv")
    return net.avg_pool(h, 2, 2, name=f"{name}_pool")


def _densenet(block_config: tuple[int, ...]):
    def body(net: Net, x: Tensor) -> Tensor:
        x = net.conv(x, 64, 7, stride=2, padding=3, name="conv0")
        x = net.max_pool(x, 3, 2, 1, name="pool0")
        for i, layers in enumerate(block_config, start=1):
            x = _dense_block(net, x, layers, f"denseblock{i}")
            if i < len(block_config):
                x = _transition(net, x, f"transition{i}")
        x = net.bn_act(x, name="norm5")
        x = net.global_avg_pool(x, name="avgpool")
        x = net.flatten(x, name="flatten")
        return net.dense(x, 1000, name="classifier")

    return body


densenet121 = Network(_densenet((6, 12, 24, 16)), calibration_size=128)
densenet201 = Network(_densenet((6, 12, 48, 32)), calibration_size=128)
