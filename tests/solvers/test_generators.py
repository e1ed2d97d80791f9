"""Synthetic generators: seeded, shaped as designed, costs following the layout labels, always valid problems."""

from __future__ import annotations

import doctest
import json
from collections import Counter

import numpy as np
import pytest

from solvers import Problem, ProblemError, generators
from solvers.generators import GENERATORS, LAYOUTS, generate, layout_of

SMALL = {"chain": {"nodes": 40}, "random": {"nodes": 40}, "densenet": {}, "ssd": {}}


def _in_degree(problem: Problem) -> Counter[str]:
    return Counter(e.dst for e in problem.edges)


LABELLED = sorted(SMALL)
"""The generators of ``generators.py``; ``blocks`` (``dense_blocks.py``) labels candidates differently, see
test_dense_blocks.py."""


@pytest.mark.parametrize("kind", LABELLED)
def test_seeded(kind):
    first = json.dumps(generate(kind, seed=3, candidates=4, **SMALL[kind]).to_dict())
    again = json.dumps(generate(kind, seed=3, candidates=4, **SMALL[kind]).to_dict())
    other = json.dumps(generate(kind, seed=4, candidates=4, **SMALL[kind]).to_dict())
    assert first == again
    assert first != other


@pytest.mark.parametrize("kind", LABELLED)
def test_valid_topological_and_labelled(kind):
    problem = generate(kind, seed=1, candidates=5, **SMALL[kind])
    assert Problem.from_dict(json.loads(json.dumps(problem.to_dict()))).to_dict() == problem.to_dict()
    assert (problem.meta["generator"], problem.meta["seed"], problem.meta["params"]["candidates"]) == (kind, 1, 5)
    for node in problem.nodes:
        expected = len(LAYOUTS) if node.name.endswith("concat") else 5
        assert len(node.candidates) == expected
        assert all(layout_of(c) in LAYOUTS for c in node.candidates)
        assert np.all(node.costs > 0) and np.all(np.isfinite(node.costs))
    for edge in problem.edges:
        assert problem.index(edge.src) < problem.index(edge.dst)  # listed in order, producer -> consumer
        src, dst = problem.nodes[problem.index(edge.src)], problem.nodes[problem.index(edge.dst)]
        same = np.array([[layout_of(a) == layout_of(b) for b in dst.candidates] for a in src.candidates])
        assert np.all(edge.costs[same] == 0)
        assert np.all(edge.costs[~same] > 0) and np.all(np.isfinite(edge.costs))


def test_chain():
    problem = generate("chain", seed=0, nodes=25, candidates=3)
    assert problem.num_nodes == 25 and problem.domain_sizes == (3,) * 25
    assert [(e.src, e.dst) for e in problem.edges] == [(f"conv{i}", f"conv{i + 1}") for i in range(24)]
    assert problem.meta["params"] == {"candidates": 3, "nodes": 25}


def test_densenet_201_shape():
    problem = generate("densenet", seed=0, candidates=8)
    names = [n.name for n in problem.nodes]
    concats = [n for n in names if n.endswith("concat")]
    convs = [n for n in names if not n.endswith("concat") and n != "classifier"]
    assert len(convs) == 1 + 2 * (6 + 12 + 48 + 32) + 3 == 200
    assert len(concats) == 6 + 12 + 48 + 32 + 4
    assert names[0] == "stem" and names[-1] == "classifier"
    indegree = _in_degree(problem)
    for block, size in enumerate((6, 12, 48, 32), start=1):
        for i in range(size):
            assert indegree[f"block{block}/layer{i}/concat"] == i + 1
            assert indegree[f"block{block}/layer{i}/conv1x1"] == 1
    assert indegree["transition1/concat"] == 7 and indegree["final/concat"] == 33
    # layer 2 of block 1 reads the block input (the stem) and the 3x3 convs of layers 0 and 1
    inputs = {e.src for e in problem.edges if e.dst == "block1/layer2/concat"}
    assert inputs == {"stem", "block1/layer0/conv3x3", "block1/layer1/conv3x3"}


def test_densenet_blocks_parameter():
    problem = GENERATORS["densenet"](2, 0, blocks=(2, 3))
    assert problem.num_nodes == 1 + 3 * (2 + 3) + 2 + 2  # stem, layers, one transition, final concat + classifier
    assert problem.meta["params"] == {"candidates": 2, "blocks": [2, 3]}


def test_ssd_shape():
    problem = generate("ssd", seed=0, candidates=4)
    names = [n.name for n in problem.nodes]
    heads = [n for n in names if n.startswith("head")]
    assert sorted(heads) == sorted(f"head{s}/{h}" for s in range(1, 7) for h in ("class", "box"))
    feature = {e.dst: e.src for e in problem.edges if e.dst in heads}
    for scale in range(1, 7):
        assert feature[f"head{scale}/class"] == feature[f"head{scale}/box"]
    assert len(set(feature.values())) == 6
    bottlenecks = [n for n in names if n.endswith("/conv3") and n.startswith("layer")]
    assert len(bottlenecks) == 16 and len([n for n in names if n.endswith("downsample")]) == 4
    indegree = _in_degree(problem)
    assert all(indegree[n] == 2 for n in bottlenecks)  # main path and shortcut: the residual add is fused
    shortcut = {e.src for e in problem.edges if e.dst == "layer2/block0/conv3"}
    assert shortcut == {"layer2/block0/conv2", "layer2/block0/downsample"}
    assert problem.num_nodes == 1 + 16 * 3 + 4 + 3 * 2 + 12


def test_random_graph_degree():
    problem = GENERATORS["random"](60, 3, 5, degree=2)
    indegree = _in_degree(problem)
    assert indegree["op0"] == 0
    assert all(1 <= indegree[f"op{i}"] <= 2 for i in range(1, 60))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "resnet", "seed": 0}, "unknown generator 'resnet'"),
        ({"kind": "chain", "seed": 0, "nodes": 0}, "nodes must be a positive integer"),
        ({"kind": "random", "seed": 0, "nodes": 5, "candidates": 0}, "candidates must be a positive integer"),
        ({"kind": "ssd", "seed": 0, "candidates": True}, "candidates must be a positive integer"),
        ({"kind": "densenet", "seed": -1}, "seed must be a non-negative integer"),
        ({"kind": "densenet", "seed": 0, "nodes": 10}, "nodes applies to chain and random"),
        ({"kind": "random", "seed": 0, "nodes": 10**9}, "nodes must be at most 100,000"),
        ({"kind": "chain", "seed": 0, "candidates": 10**6}, "candidates must be at most 1,000"),
        ({"kind": "chain", "seed": 0, "nodes": 1000, "candidates": 1000}, "1,000,000,000 cost entries .* limit of"),
        ({"kind": "densenet", "seed": 0, "candidates": 1000}, "densenet: .* cost entries or more, above the limit"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ProblemError, match=message):
        generate(**kwargs)


def test_docstring_examples():
    assert doctest.testmod(generators).failed == 0
