"""The second DenseNet-shaped generator: seeded, candidates that the channel counts allow, edges free exactly where the
producer writes the layout the consumer reads, and a shape of its own."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from solvers import ProblemError, dense_blocks
from solvers.dense_blocks import dense_blocks as blocks
from solvers.generators import GENERATORS, generate


def test_seeded_and_listed():
    assert GENERATORS["blocks"] is blocks
    first, again, other = (generate("blocks", seed=s, candidates=6).to_dict() for s in (3, 3, 4))
    assert first == again and first != other


def test_candidates_edges_and_shape():
    problem = blocks(8, seed=1)
    assert (problem.num_nodes, len(problem.edges)) == (121, 655)  # no concat nodes: each 1x1 conv reads its block
    assert problem.meta["generator"] == "blocks" and problem.meta["params"]["growth"] == 12
    for node in problem.nodes:
        assert 1 <= len(node.candidates) <= 8 and np.all(node.costs > 0) and np.all(np.isfinite(node.costs))
        assert all(">" in c and ":t" in c for c in node.candidates)
    for edge in problem.edges:
        src, dst = problem.nodes[problem.index(edge.src)], problem.nodes[problem.index(edge.dst)]
        writes = [c.split(">")[1].split(":")[0] for c in src.candidates]
        reads = [c.split(">")[0] for c in dst.candidates]
        same = np.array([[w == r for r in reads] for w in writes])
        assert np.all(edge.costs[same] == 0) and np.all(edge.costs[~same] > 0)


def test_channel_blocks_divide_the_channels():
    problem = blocks(40, seed=0, blocks=(2,), growth=12)  # 24 + 12 i channels: NCHW16c only where 16 divides
    conv = problem.nodes[problem.index("block1/layer1/conv1x1")]  # reads 36 channels
    assert all(not c.startswith(("NCHW16c", "NCHW32c")) for c in conv.candidates)


def test_bad_arguments():
    with pytest.raises(ProblemError, match="candidates must be a positive integer"):
        blocks(0, seed=0)
    with pytest.raises(ProblemError, match="growth must be a positive integer"):
        blocks(4, seed=0, growth=0)
    with pytest.raises(ProblemError, match="nodes applies to chain and random"):
        generate("blocks", seed=0, nodes=10)


def test_docstring_examples():
    assert doctest.testmod(dense_blocks).failed == 0
