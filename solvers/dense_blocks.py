"""A second DenseNet-shaped generator, built differently from ``solvers/generators.py`` to check that what is tuned on
one generator's instances holds on another's.

Where ``generators.densenet`` has concat nodes with one candidate per layout and candidates that carry one layout,
here (as in tessera's real candidate spaces) every candidate of a convolution is an *(input layout, output layout,
register tile)* triple, and there are no concat nodes: the 1x1 convolution of each layer reads every earlier output of
its block directly, one edge each. An edge costs nothing when the producer's output layout is the layout the consumer
reads, and otherwise a transform of the producer's tensor. The cost law is a roofline rather than FLOPs times noise:

- a convolution takes ``max(FLOPs / compute rate, bytes / bandwidth)``; the compute rate depends on how well the output
  layout's channel block fills the 16-lane vector unit and on the register tile (a log-normal factor per tile); the
  bandwidth on whether the input layout reads contiguous channels (blocked, NHWC) or strided ones (NCHW);
- a layout ``NCHW{c}c`` is only offered where ``c`` divides the channels (growth 12 as in DenseNet-BC makes the channel
  counts, and so the candidate sets, differ from layer to layer);
- a transform moves the tensor at a bandwidth that depends on the pair of layouts (a change of block size is cheaper
  than a change between planar and interleaved), times a small log-normal factor per edge.

Examples
--------
>>> p = dense_blocks(8, seed=0)
>>> len(p.nodes), len(p.edges), p.meta["generator"]
(121, 655, 'blocks')
>>> p.nodes[1].candidates[:2]
('NCHW>NCHW:t1', 'NCHW>NHWC:t2')
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from solvers.generator_sizes import check_sizes
from solvers.problem import Problem

LAYOUTS = ("NCHW", "NHWC", "NCHW4c", "NCHW8c", "NCHW16c", "NCHW32c")
TILES = 4
"""Register tiles per layout pair (each a log-normal factor on the compute rate)."""

_PEAK_FLOPS_PER_US = 2e5  # 200 GFLOP/s
_BYTES_PER_US = 2e4  # 20 GB/s
_LANES = 16


def _block(layout: str) -> int:
    """The channel block of a layout (1 for NCHW, the channel count's share for NHWC: fully contiguous)."""
    if layout == "NCHW":
        return 1
    if layout == "NHWC":
        return _LANES
    return int(layout[4:-1])


def _offered(channels: int) -> list[str]:
    return [layout for layout in LAYOUTS if layout in ("NCHW", "NHWC") or channels % _block(layout) == 0]


def _transform_rate(src: str, dst: str) -> float:
    """Relative bandwidth of a transform: block-size changes are cheapest, planar <-> interleaved dearest."""
    blocked = {layout: layout not in ("NCHW", "NHWC") for layout in (src, dst)}
    if blocked[src] and blocked[dst]:
        return 0.8
    if "NCHW" in (src, dst) and "NHWC" in (src, dst):
        return 0.25
    return 0.45


class _Network:
    """Nodes and edges with their costs as the network is laid out; ``problem()`` validates them."""

    def __init__(self, candidates: int, seed: int) -> None:
        self.k = candidates
        self.rng = np.random.default_rng(seed)
        self.nodes: list[tuple[str, list[str], np.ndarray]] = []
        self.edges: list[tuple[str, str, np.ndarray]] = []
        self.out_layout: dict[str, list[str]] = {}
        self.in_layout: dict[str, list[str]] = {}
        self.bytes: dict[str, float] = {}

    def conv(self, name: str, h: int, c_in: int, c_out: int, kernel: int, inputs: Sequence[str]) -> str:
        """A convolution reading ``inputs`` (``c_in`` channels in all) at ``h`` x ``h``, writing ``c_out``."""
        flops = 2.0 * h * h * c_in * c_out * kernel * kernel
        read, written = 4.0 * h * h * c_in, 4.0 * h * h * c_out
        space = [(i, o, t) for i in _offered(c_in) for o in _offered(c_out) for t in range(TILES)]
        picked = sorted(self.rng.choice(len(space), size=min(self.k, len(space)), replace=False))
        names, costs, ins, outs = [], [], [], []
        for index in picked:
            src, dst, tile = space[index]
            fill = min(_block(dst), _LANES) / _LANES
            rate = _PEAK_FLOPS_PER_US * (0.35 + 0.65 * fill) * self.rng.lognormal(0.0, 0.15)
            bandwidth = _BYTES_PER_US * (0.4 if src == "NCHW" else 1.0)
            costs.append(max(flops / rate, (read + written) / bandwidth))
            names.append(f"{src}>{dst}:t{tile}")
            ins.append(src)
            outs.append(dst)
        self.nodes.append((name, names, np.round(np.array(costs), 3)))
        self.in_layout[name], self.out_layout[name], self.bytes[name] = ins, outs, written
        for src in inputs:
            self._edge(src, name)
        return name

    def _edge(self, src: str, dst: str) -> None:
        seconds = self.bytes[src] / _BYTES_PER_US * self.rng.lognormal(0.0, 0.1)
        matrix = np.array([[0.0 if a == b else seconds / _transform_rate(a, b) for b in self.in_layout[dst]]
                           for a in self.out_layout[src]])
        self.edges.append((src, dst, np.round(matrix, 3)))

    def problem(self, seed: int, blocks: Sequence[int], growth: int) -> Problem:
        meta = {"generator": "blocks", "seed": int(seed), "unit": "us",
                "params": {"candidates": self.k, "blocks": list(blocks), "growth": growth}}
        return Problem.build(self.nodes, self.edges, meta)


def dense_blocks(
    candidates: int, seed: int, blocks: Sequence[int] = (6, 12, 24, 16), growth: int = 12
) -> Problem:
    """DenseNet-BC-like (224x224 input, growth ``growth``, bottleneck 4 x growth, compression 0.5).

    A stem conv, then per dense block ``n`` layers of a 1x1 conv (reading the block input and every earlier layer's
    output) and a 3x3 conv; a transition 1x1 conv between blocks reads the whole block; a classifier (a 1x1 conv on a
    1x1 map) at the end. ``candidates`` per conv are drawn from the (input layout, output layout, tile) triples the
    channel counts allow.
    """
    blocks = tuple(blocks)
    check_sizes(candidates=candidates, seed=seed, blocks=blocks, growth=growth)
    net = _Network(candidates, seed)
    h, c = 56, 2 * growth
    block_input = net.conv("stem", 112, 3, c, 7, [])
    for n_block, layers in enumerate(blocks, start=1):
        outputs = [block_input]
        for i in range(layers):
            c_in = c + growth * i
            name = f"block{n_block}/layer{i}"
            mid = net.conv(f"{name}/conv1x1", h, c_in, 4 * growth, 1, outputs)
            outputs.append(net.conv(f"{name}/conv3x3", h, 4 * growth, growth, 3, [mid]))
        c += growth * layers
        if n_block < len(blocks):
            block_input = net.conv(f"transition{n_block}", h, c, c // 2, 1, outputs)
            h, c = max(h // 2, 1), c // 2
        else:
            net.conv("classifier", 1, c, 1000, 1, outputs)
    return net.problem(seed, blocks, growth)

