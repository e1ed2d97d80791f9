"""LiveAssignment: the incremental cost and conditional costs match a recomputation after any sequence of moves,
undo restores the exact previous state, each move is the best of its kind, and the induced problem is the full one
with the rest held fixed."""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest

from solvers import Problem, live_assignment
from solvers.live_assignment import LiveAssignment
from solvers.local_search import independent_neighbours, penalised
from solvers.testing import frustrated_grid, random_problem
from tests.solvers.test_functional import planted_problem


def penalised_cost(problem: Problem, x, tables=None) -> float:
    """The total with forbidden entries at ``local_search.penalised``'s finite penalty, recomputed from scratch
    (``tables``: ``penalised(problem)``, computed here when not given)."""
    _, costs, adj = tables or penalised(problem)
    unary = math.fsum(float(c[i]) for c, i in zip(costs, x))
    return unary + math.fsum(float(m[x[u], x[v]]) for u, nbrs in enumerate(adj) for v, m in nbrs.items() if u < v)


def check_consistent(live: LiveAssignment) -> None:
    """``cost`` and every node's conditional costs equal a recomputation; a finite assignment costs what
    ``evaluate`` says."""
    problem, x = live.problem, live.assignment
    assert live.cost == pytest.approx(penalised_cost(problem, x), rel=1e-12, abs=1e-9)
    if math.isfinite(problem.evaluate(x)):
        assert live.cost == pytest.approx(problem.evaluate(x), rel=1e-12, abs=1e-9)
    _, costs, adj = penalised(problem)
    for u, nbrs in enumerate(adj):
        expected = costs[u] + sum((m[:, x[v]] for v, m in nbrs.items()), np.zeros(len(costs[u])))
        np.testing.assert_allclose(live.field[u, : len(costs[u])], expected, rtol=1e-12, atol=1e-9)


def instances(count: int):
    """Integer costs with forbidden entries (random, planted hard constraints) and real costs (grids)."""
    for seed in range(count):
        yield random_problem(seed, nodes=7, density=0.7, max_candidates=4, forbid=0.15)
        yield planted_problem(seed, nodes=7)
        if seed % 4 == 0:
            yield frustrated_grid(4, 3, seed)


def random_start(problem: Problem, rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(rng.integers(size)) for size in problem.domain_sizes)


def test_random_moves_descents_and_undos_keep_the_cost_and_undo_restores_it_exactly():
    rng = np.random.default_rng(0)
    undone = 0
    for problem in instances(20):
        integer = all(float(c).is_integer() for node in problem.nodes for c in node.costs[np.isfinite(node.costs)])
        live = LiveAssignment(problem, random_start(problem, rng))
        check_consistent(live)
        for _ in range(30):
            mark, before, cost = len(live.journal), live.assignment, live.cost
            op = int(rng.integers(5))
            if op == 0:
                v = int(rng.integers(problem.num_nodes))
                live.set(v, int(rng.integers(problem.domain_sizes[v])))
            elif op == 1:
                nodes = rng.choice(problem.num_nodes, size=int(rng.integers(1, problem.num_nodes + 1)), replace=False)
                moves = live.descend(nodes.tolist())
                assert live.cost <= cost + 1e-9 and (moves > 0) == (live.assignment != before)
            elif op == 2:
                live.best_pair_move(int(rng.integers(problem.num_nodes)))
                assert live.cost <= cost + 1e-9
            elif op == 3:
                live.best_star_move(int(rng.integers(problem.num_nodes)))
                assert live.cost <= cost + 1e-9
            else:
                live.undo(int(rng.integers(len(live.journal) + 1)))
            check_consistent(live)
            if rng.random() < 0.5 and len(live.journal) > mark:  # undo what this step did
                live.undo(mark)
                undone += 1
                assert live.assignment == before and len(live.journal) == mark
                if integer:
                    assert live.cost == cost  # integer costs: no rounding, so exactly
                else:
                    assert live.cost == pytest.approx(cost, rel=1e-12)
                check_consistent(live)
        live.undo()
        assert live.journal == []
    assert undone > 100


def test_undo_to_zero_returns_to_the_start():
    problem = planted_problem(5, nodes=8)
    start = random_start(problem, np.random.default_rng(5))
    live = LiveAssignment(problem, start)
    cost = live.cost
    live.descend(range(problem.num_nodes))
    live.set(0, (live.assignment[0] + 1) % problem.domain_sizes[0])
    assert live.journal and live.assignment != start
    live.undo()
    assert live.assignment == start and live.cost == cost and live.journal == []


def test_star_and_pair_moves_reach_the_best_joint_choice_of_their_nodes():
    """Against enumerating every joint choice of the centre with its star's leaves (or with any one neighbour)."""
    rng = np.random.default_rng(1)
    moved = {"star": 0, "pair": 0}
    for problem in instances(8):
        tables = penalised(problem)
        adj = tables[2]
        for _ in range(2):
            x = random_start(problem, rng)
            for u in range(problem.num_nodes):
                live = LiveAssignment(problem, x)
                for kind in ("star", "pair"):
                    live.undo()
                    if kind == "star":
                        groups = [(u, *independent_neighbours(u, adj))]
                    else:
                        groups = [(u, v) for v in sorted(adj[u])]
                    best = min((_best_joint(problem, tables, x, nodes) for nodes in groups), default=live.cost)
                    changed = (live.best_star_move if kind == "star" else live.best_pair_move)(u)
                    check_consistent(live)
                    if changed:
                        moved[kind] += 1
                        assert live.cost == pytest.approx(best), (kind, u)
                    else:  # no joint choice is lower than the current cost, beyond rounding
                        assert best >= live.cost - live.tolerance(), (kind, u)
    assert min(moved.values()) > 50


def _best_joint(problem: Problem, tables, x: tuple[int, ...], nodes: tuple[int, ...]) -> float:
    """The lowest penalised total over every joint choice of ``nodes``, the rest as in ``x``."""
    best, y = math.inf, list(x)
    for choice in itertools.product(*(range(problem.domain_sizes[v]) for v in nodes)):
        for v, c in zip(nodes, choice):
            y[v] = c
        best = min(best, penalised_cost(problem, y, tables))
    return best


def test_descend_from_everywhere_ends_where_no_single_node_move_helps():
    rng = np.random.default_rng(2)
    for problem in instances(10):
        live = LiveAssignment(problem, random_start(problem, rng))
        cost = live.cost
        live.descend(range(problem.num_nodes))
        assert live.cost <= cost
        for u in range(problem.num_nodes):  # a node whose neighbours moved was re-examined at least for itself
            row = live.field[u, : problem.domain_sizes[u]]
            assert row.min() >= row[live.assignment[u]] - live.tolerance(), u


def test_descend_stops_at_the_deadline():
    problem = frustrated_grid(12, 4, seed=3)
    start = (0,) * problem.num_nodes
    late = LiveAssignment(problem, start)
    assert late.descend(range(problem.num_nodes), deadline=0.0) < live_assignment.CHECK_EVERY
    free = LiveAssignment(problem, start)
    assert free.descend(range(problem.num_nodes)) > live_assignment.CHECK_EVERY


def test_induced_problem_is_the_full_one_with_the_rest_held_fixed():
    rng = np.random.default_rng(3)
    for problem in instances(10):
        live = LiveAssignment(problem, random_start(problem, rng))
        tables = penalised(problem)
        for _ in range(3):
            size = int(rng.integers(1, min(4, problem.num_nodes) + 1))
            region = [int(v) for v in rng.choice(problem.num_nodes, size=size, replace=False)]
            sub = live.induced(region)
            assert [node.name for node in sub.nodes] == [str(v) for v in region]
            assert sub.domain_sizes == tuple(problem.domain_sizes[v] for v in region)
            assert all(np.isfinite(node.costs).all() for node in sub.nodes)
            y, offsets = list(live.assignment), []
            for choice in itertools.product(*(range(k) for k in sub.domain_sizes)):
                for v, c in zip(region, choice):
                    y[v] = c
                offsets.append(penalised_cost(problem, y, tables) - sub.evaluate(choice))
            assert max(offsets) - min(offsets) == pytest.approx(0, abs=1e-9 * max(1.0, live.cost))


def test_docstring_examples():
    assert doctest.testmod(live_assignment).failed == 0
