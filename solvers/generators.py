"""Seeded synthetic problems shaped like the ones tessera extracts from real networks.

One node per tunable operator (conv or dense) with ``candidates`` candidates, plus concat nodes of their own whose
candidates are the layouts (one each). Every candidate carries a layout label, the part of its name before the ``/``
(``"NCHW16c/k3"``: layout ``NCHW16c``, variant 3). Costs are in microseconds:

- a tunable node costs ``FLOPs / throughput`` times a log-normal factor for the node and one for each candidate;
- a concat node costs the copy of its output tensor, times log-normal factors;
- an edge ``producer -> consumer`` costs 0 where the two candidates share a layout, and otherwise a layout transform of
  the producer's output tensor: its size times a transform cost per layout pair (one table per problem) times a
  log-normal factor per edge and pair.

A multi-input node (a concat, or a conv into which a residual add is fused) has one edge per input, each with its own
tensor size. Nodes are listed in topological order and edges run producer -> consumer. Sizes are bounded
(``MAX_NODES``, ``MAX_CANDIDATES``, ``MAX_ENTRIES`` of ``solvers/generator_sizes.py``): a request past them is refused
before its arrays are allocated.

Examples
--------
>>> p = generate("densenet", seed=0, candidates=8)
>>> len(p.nodes), sum(n.name.endswith("concat") for n in p.nodes), p.meta["generator"]
(303, 102, 'densenet')
>>> p.nodes[0].name, p.nodes[0].candidates[:2], layout_of(p.nodes[0].candidates[0])
('stem', ('NCHW16c/k0', 'NCHW8c/k1'), 'NCHW16c')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from solvers.dense_blocks import dense_blocks
from solvers.generator_sizes import check_entries, check_sizes
from solvers.problem import Problem, ProblemError

LAYOUTS = ("NCHW", "NHWC", "NCHW4c", "NCHW8c", "NCHW16c", "NCHW32c")
"""Layout labels candidates are drawn from; concat nodes have one candidate per layout."""

_US_PER_FLOP = 1e-5  # 100 GFLOP/s
_US_PER_TRANSFORMED_ELEMENT = 8e-4  # 4-byte elements at 5 GB/s: strided reads
_US_PER_COPIED_ELEMENT = 2e-4  # 4-byte elements at 20 GB/s: contiguous copies


def layout_of(candidate: str) -> str:
    """The layout label of a generated candidate name (``"NCHW16c/k3"`` -> ``"NCHW16c"``)."""
    return candidate.split("/", 1)[0]


class _Builder:
    """Collects nodes and edges with their random costs; ``problem()`` returns the validated ``Problem``."""

    def __init__(self, generator: str, candidates: int, seed: int) -> None:
        self.generator, self.k, self.entries = generator, candidates, 0
        self.rng = np.random.default_rng(seed)
        n = len(LAYOUTS)
        self.layout_speed = self.rng.lognormal(0.0, 0.1, n)  # some layouts suit the machine a little better
        self.transform_factor = self.rng.lognormal(0.0, 0.3, (n, n))  # some transforms are harder than others
        self.nodes: list[tuple[str, list[str], np.ndarray]] = []
        self.edges: list[tuple[str, str, np.ndarray]] = []
        self.labels: dict[str, np.ndarray] = {}
        self.tensor: dict[str, float] = {}

    def op(self, name: str, flops: float, out_elements: float, inputs: Sequence[str] = ()) -> str:
        """A tunable operator; ``out_elements`` is the size of the tensor its consumers read."""
        self._reserve(self.k)
        labels = self.rng.integers(0, len(LAYOUTS), self.k)
        base = flops * _US_PER_FLOP * self.rng.lognormal(0.0, 0.2)
        costs = base * self.layout_speed[labels] * self.rng.lognormal(0.0, 0.3, self.k)
        names = [f"{LAYOUTS[label]}/k{i}" for i, label in enumerate(labels)]
        return self._add(name, names, labels, costs, out_elements, inputs)

    def concat(self, name: str, out_elements: float, inputs: Sequence[str]) -> str:
        """A concat node: one candidate per layout, costing a copy of the output; one edge per input."""
        labels = np.arange(len(LAYOUTS))
        base = out_elements * _US_PER_COPIED_ELEMENT * self.rng.lognormal(0.0, 0.2)
        costs = base * self.rng.lognormal(0.0, 0.1, len(LAYOUTS))
        names = [f"{layout}/concat" for layout in LAYOUTS]
        return self._add(name, names, labels, costs, out_elements, inputs)

    def _add(
        self, name: str, names: list[str], labels: np.ndarray, costs: np.ndarray, out: float, inputs: Sequence[str]
    ) -> str:
        self.nodes.append((name, names, _rounded(costs)))
        self.labels[name] = labels
        self.tensor[name] = float(out)
        for src in inputs:
            self._edge(src, name)
        return name

    def _edge(self, src: str, dst: str) -> None:
        a, b = self.labels[src], self.labels[dst]
        self._reserve(len(a) * len(b))
        n = len(LAYOUTS)
        per_pair = self.transform_factor * self.rng.lognormal(0.0, 0.1, (n, n))
        costs = self.tensor[src] * _US_PER_TRANSFORMED_ELEMENT * per_pair[np.ix_(a, b)]
        costs = np.where(a[:, None] == b[None, :], 0.0, _rounded(costs))
        self.edges.append((src, dst, costs))

    def _reserve(self, entries: int) -> None:
        """Count ``entries`` more cost entries, refusing them past ``MAX_ENTRIES`` before they are allocated."""
        self.entries += entries
        check_entries(self.generator, self.entries)

    def problem(self, seed: int, **params: Any) -> Problem:
        params = {"candidates": self.k, **params}
        params = {key: int(v) if isinstance(v, np.integer) else v for key, v in params.items()}  # JSON-friendly
        meta = {"generator": self.generator, "params": params, "seed": int(seed), "unit": "us"}
        return Problem.build(self.nodes, self.edges, meta)


def _rounded(costs: np.ndarray) -> np.ndarray:
    """Costs to the nanosecond, never below one (a transform is never free, a kernel never takes no time)."""
    return np.maximum(np.round(costs, 3), 1e-3)


def _conv_flops(h: int, c_out: int, c_in: int, kernel: int) -> float:
    return 2.0 * h * h * c_out * c_in * kernel * kernel


# -------------------------------------------------------------------------------------------------------- generators
def chain(nodes: int, candidates: int, seed: int) -> Problem:
    """A chain of ``nodes`` convolutions: five stages halving the feature map and doubling the channels."""
    check_sizes(nodes=nodes, candidates=candidates, seed=seed)
    check_entries("chain", nodes * candidates + (nodes - 1) * candidates**2)
    b = _Builder("chain", candidates, seed)
    prev: list[str] = []
    c_in = 3
    for i in range(nodes):
        stage = i * 5 // nodes
        h, c = 112 >> stage, 64 << stage
        kernel = 3 if i % 2 else 1
        prev = [b.op(f"conv{i}", _conv_flops(h, c, c_in, kernel), h * h * c, prev)]
        c_in = c
    return b.problem(seed, nodes=nodes)


def densenet(candidates: int, seed: int, blocks: Sequence[int] = (6, 12, 48, 32)) -> Problem:
    """DenseNet-201-like (224x224 input, growth 32): ~200 convolutions, one concat node per layer and transition.

    Stem conv (a max pool follows); per dense block, layer ``i`` is a concat node reading the block input and the
    outputs of layers ``0..i-1`` (``i + 1`` edges), then a 1x1 conv to 128 channels, then a 3x3 conv to 32 channels;
    between blocks a transition concat of the whole block, a 1x1 conv halving the channels (an average pool follows);
    at the end the concat of the last block and the classifier (dense, 1000 classes).
    """
    blocks = tuple(blocks)
    check_sizes(candidates=candidates, seed=seed, blocks=blocks)
    b, growth = _Builder("densenet", candidates, seed), 32
    h, c = 56, 64
    block_input = b.op("stem", _conv_flops(112, 64, 3, 7), h * h * c)
    for n_block, layers in enumerate(blocks, start=1):
        outputs = [block_input]
        for i in range(layers):
            c_in = c + growth * i
            layer = f"block{n_block}/layer{i}"
            cat = b.concat(f"{layer}/concat", h * h * c_in, outputs)
            mid = b.op(f"{layer}/conv1x1", _conv_flops(h, 128, c_in, 1), h * h * 128, [cat])
            outputs.append(b.op(f"{layer}/conv3x3", _conv_flops(h, growth, 128, 3), h * h * growth, [mid]))
        c += growth * layers
        last = n_block == len(blocks)
        cat = b.concat("final/concat" if last else f"transition{n_block}/concat", h * h * c, outputs)
        if last:
            b.op("classifier", 2.0 * c * 1000, 1000, [cat])
        else:
            flops, h, c = _conv_flops(h, c // 2, c, 1), max(h // 2, 1), c // 2  # the pool halves the map
            block_input = b.op(f"transition{n_block}/conv", flops, h * h * c, [cat])
    return b.problem(seed, blocks=list(blocks))


def ssd(candidates: int, seed: int) -> Problem:
    """SSD300-like: ResNet-50 backbone, three extra feature blocks and six multi-scale heads.

    The backbone is the stem conv (a max pool follows) and 16 bottlenecks of three convs (1x1, 3x3, 1x1), the first
    of each stage with a 1x1 downsample conv. The residual add is fused into a bottleneck's last conv, so the shortcut
    producer (the block input or the downsample conv) has an edge to it. Features are read at 38, 19, 10, 5, 3 and 1
    pixels (stage 2, 3, 4 outputs and the extra blocks); each scale has a class conv and a box conv.
    """
    check_sizes(candidates=candidates, seed=seed)
    b = _Builder("ssd", candidates, seed)
    h, c = 75, 64
    x = b.op("stem", _conv_flops(150, 64, 3, 7), h * h * c)
    features: list[tuple[str, int, int]] = []
    for stage, (width, repeats, stride) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), (1, 2, 2, 2)), start=1):
        for block in range(repeats):
            name, s = f"layer{stage}/block{block}", stride if block == 0 else 1
            h_out, c_out = -(-h // s), 4 * width
            shortcut = x
            if block == 0:
                shortcut = b.op(f"{name}/downsample", _conv_flops(h_out, c_out, c, 1), h_out * h_out * c_out, [x])
            y = b.op(f"{name}/conv1", _conv_flops(h, width, c, 1), h * h * width, [x])
            y = b.op(f"{name}/conv2", _conv_flops(h_out, width, width, 3), h_out * h_out * width, [y])
            x = b.op(f"{name}/conv3", _conv_flops(h_out, c_out, width, 1), h_out * h_out * c_out, [y, shortcut])
            h, c = h_out, c_out
        if stage >= 2:
            features.append((x, h, c))
    for n_extra, (mid, c_out, h_out) in enumerate(((256, 512, 5), (128, 256, 3), (128, 256, 1)), start=1):
        y = b.op(f"extra{n_extra}/conv1x1", _conv_flops(h, mid, c, 1), h * h * mid, [x])
        x = b.op(f"extra{n_extra}/conv3x3", _conv_flops(h_out, c_out, mid, 3), h_out * h_out * c_out, [y])
        h, c = h_out, c_out
        features.append((x, h, c))
    for n_head, ((feature, h, c), anchors) in enumerate(zip(features, (4, 6, 6, 6, 4, 4)), start=1):
        b.op(f"head{n_head}/class", _conv_flops(h, anchors * 81, c, 3), h * h * anchors * 81, [feature])
        b.op(f"head{n_head}/box", _conv_flops(h, anchors * 4, c, 3), h * h * anchors * 4, [feature])
    return b.problem(seed)


def random_graph(nodes: int, candidates: int, seed: int, degree: int = 3) -> Problem:
    """A random sparse DAG: each node after the first reads 1 to ``degree`` distinct earlier nodes."""
    check_sizes(nodes=nodes, candidates=candidates, seed=seed, degree=degree)
    check_entries("random", nodes * candidates + (nodes - 1) * candidates**2)  # every node but the first has an input
    b = _Builder("random", candidates, seed)
    shapes: list[tuple[int, int]] = []
    for i in range(nodes):
        h, c = int(b.rng.choice((7, 14, 28, 56))), int(b.rng.choice((64, 128, 256, 512)))
        inputs = [] if i == 0 else b.rng.choice(i, size=min(i, int(b.rng.integers(1, degree + 1))), replace=False)
        c_in = max((shapes[j][1] for j in inputs), default=3)
        kernel = int(b.rng.choice((1, 3)))
        b.op(f"op{i}", _conv_flops(h, c, c_in, kernel), h * h * c, [f"op{j}" for j in sorted(inputs)])
        shapes.append((h, c))
    return b.problem(seed, nodes=nodes, degree=degree)


GENERATORS: dict[str, Callable[..., Problem]] = {
    "chain": chain,
    "densenet": densenet,
    "ssd": ssd,
    "random": random_graph,
    "blocks": dense_blocks,
}
"""Generator name -> function; ``chain`` and ``random`` take ``nodes``; ``blocks`` is the DenseNet-BC-like generator
of ``solvers/dense_blocks.py``, built differently from ``densenet``."""

_DEFAULT_NODES = {"chain": 1000, "random": 200}


def generate(kind: str, *, seed: int, nodes: int | None = None, candidates: int = 8) -> Problem:
    """Dispatch to a generator by name; ``nodes`` applies to ``chain`` (default 1000) and ``random`` (default 200)."""
    if kind not in GENERATORS:
        raise ProblemError(f"unknown generator {kind!r}; choose from {', '.join(GENERATORS)}")
    if kind in _DEFAULT_NODES:
        return GENERATORS[kind](_DEFAULT_NODES[kind] if nodes is None else nodes, candidates, seed)
    if nodes is not None:
        raise ProblemError(f"{kind}: the number of nodes is fixed by the network; nodes applies to chain and random")
    return GENERATORS[kind](candidates, seed)
