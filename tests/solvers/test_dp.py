"""The exact ``dp`` solver: brute-force agreement, reductions, elimination, the width cap and parameters."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import solvers.dp as dp_module
from solvers.base import SOLVERS, make_solver
from solvers.dp import DPSolver
from solvers.errors import SolverError
from solvers.problem import Problem
from solvers.testing import brute_force, random_problem


def make_problem(names, edges, k, seed=0, forbid=0.0):
    """Integer costs (so sums are exact); ``k`` is one domain size for all or a dict name -> size."""
    rng = np.random.default_rng(seed)
    size = k if isinstance(k, dict) else dict.fromkeys(names, k)
    nodes = []
    for name in names:
        costs = rng.integers(0, 20, size[name]).astype(float)
        costs[rng.random(size[name]) < forbid] = math.inf
        costs[rng.integers(size[name])] = rng.integers(0, 20)  # never forbid every candidate
        nodes.append((name, [f"c{j}" for j in range(size[name])], costs))
    matrices = []
    for u, v in edges:
        m = rng.integers(0, 15, (size[u], size[v])).astype(float)
        m[rng.random(m.shape) < forbid] = math.inf
        matrices.append((u, v, m))
    return Problem.build(nodes, matrices)


def exhaustive(problem: Problem) -> float:
    """The optimum by enumerating every assignment at once with numpy (for up to ~1e5 assignments)."""
    x = np.indices(problem.domain_sizes).reshape(problem.num_nodes, -1)
    total = sum(node.costs[x[i]] for i, node in enumerate(problem.nodes))
    for (u, v), m in problem.pairs.items():
        total = total + m[x[u], x[v]]
    return float(np.min(total))


def assert_exact(problem: Problem, optimum: float, **params):
    sol = DPSolver(**params).solve(problem)
    if math.isinf(optimum):
        assert sol.status == "infeasible"
        assert dict(sol.assignment) == {} and math.isinf(sol.cost) and math.isinf(sol.lower_bound)
    else:
        assert sol.status == "optimal"
        assert sol.cost == optimum == sol.lower_bound
        assert problem.evaluate(sol.assignment) == optimum
    return sol


def clique(n, prefix="n"):
    names = [f"{prefix}{i}" for i in range(n)]
    return names, list(itertools.combinations(names, 2))


# ---------------------------------------------------------------- brute force on random instances
@pytest.mark.parametrize("seed", range(300))
def test_random_instances_match_brute_force(seed):
    problem = random_problem(seed)
    assert_exact(problem, brute_force(problem)[0])


@pytest.mark.parametrize("seed", range(150))
def test_dense_random_instances_match_brute_force(seed):
    # density 0.9 on 6 nodes leaves a core of degree >= 3 for the elimination most of the time
    problem = random_problem(seed, nodes=6, density=0.9, forbid=0.2)
    assert_exact(problem, brute_force(problem)[0])


@pytest.mark.parametrize("seed", range(40))
def test_minimising_one_candidate_at_a_time_matches(seed, monkeypatch):
    monkeypatch.setattr(dp_module, "_DENSE_ENTRIES", 0)  # force the memory-bounded path everywhere
    problem = random_problem(seed, nodes=6, density=0.8, max_candidates=4)
    assert_exact(problem, brute_force(problem)[0])


@pytest.mark.parametrize("seed", range(40))
def test_elimination_alone_matches(seed, monkeypatch):
    monkeypatch.setattr(
        dp_module._Reduced,
        "reduce",
        lambda self, check_time: dict.fromkeys(("fixed", "degree-0", "degree-1", "degree-2"), 0),
    )
    problem = random_problem(seed, max_candidates=4)
    sol = assert_exact(problem, brute_force(problem)[0])
    assert "0 degree-2 nodes removed" in sol.log[0]


def test_infeasible_problems():
    both_forbidden = Problem.build(
        [("a", ["x", "y"], [0, 0]), ("b", ["x", "y"], [0, 0])], [("a", "b", [[None, None], [None, None]])]
    )
    assert_exact(both_forbidden, math.inf)
    # two colours on a triangle: every edge forbids equal colours, found only by the reductions' fold
    names, edges = clique(3)
    nodes = [(n, ["r", "g"], [0, 0]) for n in names]
    triangle = Problem.build(nodes, [(u, v, [[None, 1], [1, None]]) for u, v in edges])
    assert_exact(triangle, math.inf)
    # three colours on K4: infeasible, found by the elimination
    names, edges = clique(4)
    diff = np.where(np.eye(3) == 1, math.inf, 1.0)
    k4 = Problem.build([(n, ["r", "g", "b"], [0, 0, 0]) for n in names], [(u, v, diff) for u, v in edges])
    sol = assert_exact(k4, math.inf)
    assert "4 left" in sol.log[0]


# ---------------------------------------------------------------- structures
def test_chain_is_removed_by_degree_one_folds():
    names = [f"n{i}" for i in range(12)]
    problem = make_problem(names, list(zip(names, names[1:])), 3, seed=1, forbid=0.1)
    sol = assert_exact(problem, exhaustive(problem))
    assert "11 degree-1" in sol.log[0] and "0 left" in sol.log[0]


@pytest.mark.parametrize("length", [3, 4, 10])
def test_cycles_are_removed_by_degree_two_folds(length):
    names = [f"n{i}" for i in range(length)]
    problem = make_problem(names, list(zip(names, names[1:] + names[:1])), 3, seed=length, forbid=0.1)
    sol = assert_exact(problem, exhaustive(problem))
    assert f"{length - 2} degree-2" in sol.log[0] and "0 left" in sol.log[0]


def test_residual_blocks_reduce_completely():
    names, edges, prev = ["stem"], [], "stem"
    for b in range(5):  # in -> c1 -> c2 -> add, plus the skip edge in -> add
        c1, c2, add = f"b{b}c1", f"b{b}c2", f"b{b}add"
        names += [c1, c2, add]
        edges += [(prev, c1), (c1, c2), (c2, add), (prev, add)]
        prev = add
    problem = make_problem(names, edges, 2, seed=3, forbid=0.1)
    sol = assert_exact(problem, exhaustive(problem))
    assert "0 left" in sol.log[0]


def test_grid_needs_real_elimination():
    names = [f"g{r}{c}" for r in range(3) for c in range(3)]
    edges = [(f"g{r}{c}", f"g{r}{c + 1}") for r in range(3) for c in range(2)]
    edges += [(f"g{r}{c}", f"g{r + 1}{c}") for r in range(2) for c in range(3)]
    problem = make_problem(names, edges, 3, seed=4, forbid=0.05)
    sol = assert_exact(problem, exhaustive(problem))
    assert "4 degree-2" in sol.log[0] and "5 left" in sol.log[0]  # the corners fold away, a wheel remains
    assert "elimination: 5 nodes" in sol.log[1]


def test_k5_clique():
    names, edges = clique(5)
    problem = make_problem(names, edges, 3, seed=5, forbid=0.1)
    sol = assert_exact(problem, exhaustive(problem))
    assert "5 left" in sol.log[0]
    assert "induced width 4" in sol.log[1] and "largest table 81 entries" in sol.log[1]


def test_disconnected_parts_isolated_and_single_candidate_nodes():
    k4, k4_edges = clique(4, "q")
    tri, tri_edges = clique(3, "t")
    names = k4 + tri + ["lone1", "lone2", "hub", "fixed"]
    edges = k4_edges + tri_edges + [("hub", q) for q in k4] + [("fixed", "lone2")]
    size = dict.fromkeys(names, 3) | {"hub": 1, "fixed": 1, "lone1": 2}
    problem = make_problem(names, edges, size, seed=6, forbid=0.1)
    sol = assert_exact(problem, exhaustive(problem))
    assert "2 single-candidate" in sol.log[0]


def test_edge_free_and_one_node_problems():
    one = Problem.build([("only", ["a", "b", "c"], [3.0, None, 2.0])])
    sol = assert_exact(one, 2.0)
    assert dict(sol.assignment) == {"only": "c"}
    free = make_problem([f"n{i}" for i in range(5)], [], 4, seed=7, forbid=0.3)
    assert_exact(free, exhaustive(free))


def test_long_chain_runs():
    n, k = 1000, 10
    names = [f"n{i}" for i in range(n)]
    problem = make_problem(names, list(zip(names, names[1:])), k, seed=8, forbid=0.05)
    best = np.array(problem.nodes[0].costs)  # Viterbi: best cost of a prefix ending in each candidate
    for i in range(1, n):
        best = (best[:, None] + problem.pairs[(i - 1, i)]).min(axis=0) + problem.nodes[i].costs
    assert_exact(problem, float(best.min()))


# ---------------------------------------------------------------- width cap
def test_width_cap_message_on_a_clique():
    names, edges = clique(6)
    problem = make_problem(names, edges, 3, seed=9)
    with pytest.raises(SolverError) as info:
        DPSolver(max_table_entries=100).solve(problem)
    message = str(info.value)
    for part in ("induced width at least 5", "243 entries", "max_table_entries=100", "--solver pbqp", "--solver auto"):
        assert part in message
    assert DPSolver(max_table_entries=243).solve(problem).optimal


def test_densenet_like_graph_fails_fast_instead_of_hanging():
    names, edges, prev = ["stem"], [], "stem"
    for b, layers in enumerate((6, 12, 24)):  # each layer reads every earlier layer of its block
        members = [prev]
        for i in range(layers):
            names.append(f"b{b}l{i}")
            edges += [(m, f"b{b}l{i}") for m in members]
            members.append(f"b{b}l{i}")
        names.append(f"t{b}")
        edges += [(m, f"t{b}") for m in members]
        prev = f"t{b}"
    problem = make_problem(names, edges, 10, seed=10)
    with pytest.raises(SolverError, match=r"too wide.*induced width.*max_table_entries=1e\+07.*--solver pbqp"):
        DPSolver(time_limit=30).solve(problem)  # a time-limit error here would mean it tried to build the tables


def test_too_wide_min_fill_choice_falls_back_to_a_node_that_fits():
    # a (2 candidates) and c1, c2 (2 each) are simplicial with tables of 1000 entries; the h's (10 each) need fill
    # but only 800 entries, so with a cap of 900 the solver must eliminate an h first
    hs = ["h1", "h2", "h3"]
    edges = list(itertools.combinations(hs, 2)) + [(x, h) for x in ("a", "c1", "c2") for h in hs]
    size = {"a": 2, "c1": 2, "c2": 2, "h1": 10, "h2": 10, "h3": 10}
    problem = make_problem(list(size), edges, size, seed=11)
    sol = assert_exact(problem, exhaustive(problem), max_table_entries=900)
    assert "largest table 800 entries" in sol.log[1]


# ---------------------------------------------------------------- parameters
def test_registered_with_params():
    assert SOLVERS["dp"] is DPSolver
    solver = make_solver("dp", max_table_entries=5e4, time_limit=3)
    assert solver.get_params() == {"time_limit": 3, "max_table_entries": 5e4}
    assert DPSolver().get_params() == {"time_limit": None, "max_table_entries": 1e7}


@pytest.mark.parametrize("bad", [0, -5, 0.5, math.nan, math.inf, "big", True, None])
def test_bad_max_table_entries_rejected(bad):
    with pytest.raises(SolverError, match="max_table_entries"):
        DPSolver(max_table_entries=bad).solve(random_problem(0, nodes=2))


def test_time_limit_reached_before_an_answer_is_not_found():
    names = [f"n{i}" for i in range(50)]
    problem = make_problem(names, list(zip(names, names[1:])), 5)
    sol = DPSolver(time_limit=1e-9).solve(problem)
    assert sol.status == "not_found" and not sol.assignment and math.isinf(sol.cost)
    assert sol.log == ("dp: time limit of 1e-09 s reached; nothing found by then",)
