"""The toulbar2 solver against brute force, its rounding bound, its time limit and what it leaves of the process's
signal handling."""

from __future__ import annotations

import ctypes
import math
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from solvers import Problem, SolverError, solve
from solvers.alarm import SIGACTION_BYTES
from solvers.scaling import scale_costs
from solvers.testing import brute_force, frustrated_grid, random_problem
from solvers.toulbar2 import Toulbar2Solver


@pytest.mark.parametrize("presolve", [True, False])
def test_matches_brute_force(presolve):
    for seed in range(150):
        problem = random_problem(seed, nodes=6, density=0.3 + 0.1 * (seed % 6))
        optimum, _ = brute_force(problem)
        sol = solve(problem, "toulbar2", presolve=presolve)
        if math.isinf(optimum):
            assert sol.status == "infeasible" and not sol.assignment and sol.lower_bound == math.inf, seed
        else:
            assert (sol.status, sol.cost, sol.lower_bound) == ("optimal", optimum, optimum), (seed, sol.log)


def test_real_costs_are_optimal_within_the_rounding_bound():
    rng = np.random.default_rng(0)
    for seed in range(30):
        base = random_problem(seed, nodes=5)
        problem = Problem.build([(n.name, n.candidates, n.costs + rng.random(n.costs.shape)) for n in base.nodes],
                                [(e.src, e.dst, e.costs + rng.random(e.costs.shape) / 3) for e in base.edges])
        optimum, _ = brute_force(problem)
        error = scale_costs(problem).error
        sol = solve(problem, "toulbar2", vac=seed % 2 == 0)
        assert any(f"rounding error bound {error:g}" in line for line in sol.log)
        if math.isfinite(optimum):
            assert sol.status == "optimal" and optimum <= sol.cost <= optimum + 2 * error
            assert sol.lower_bound <= optimum


def test_an_edge_forbidding_every_pair_is_infeasible():
    problem = Problem.build([("a", ["x"], [0]), ("b", ["x", "y"], [1, 0]), ("c", ["x"], [0])],
                            [("a", "b", [[0, 1]]), ("b", "c", [[None], [None]]), ("a", "c", [[1]])])
    sol = solve(problem, "toulbar2", presolve=False)
    assert sol.status == "infeasible" and "forbids every assignment" in sol.log[-1]


def c_sigint_handler() -> bytes:
    """SIGINT's handler as the C library holds it (the first word of ``struct sigaction``)."""
    saved = ctypes.create_string_buffer(SIGACTION_BYTES)
    ctypes.CDLL(None).sigaction(signal.SIGINT, None, saved)
    return saved.raw[:8]


def test_out_of_time_returns_the_best_found_with_a_bound_and_leaves_sigint_as_it_was():
    before, before_c = signal.getsignal(signal.SIGINT), c_sigint_handler()
    sol = solve(frustrated_grid(), "toulbar2", time_limit=1.0)
    assert sol.status == "feasible" and 0 < sol.lower_bound < sol.cost and sol.seconds < 2.0
    assert "stopped (time or backtracks)" in sol.log[-1]
    assert signal.getsignal(signal.SIGINT) is before and c_sigint_handler() == before_c  # toulbar2 took it over


def test_ctrl_c_still_interrupts_python_after_a_search():
    # In a fresh interpreter with Python's SIGINT handler installed: a process started in the background by a
    # non-interactive shell (as CI may be) inherits SIGINT ignored, and Python then leaves it ignored.
    script = ("import signal; from solvers import solve; from solvers.testing import frustrated_grid; "
              "signal.signal(signal.SIGINT, signal.default_int_handler); "
              "solve(frustrated_grid(), 'toulbar2', time_limit=0.5)\n"
              "try:\n    signal.raise_signal(signal.SIGINT)\nexcept KeyboardInterrupt:\n    print('interrupted')")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.stdout.strip() == "interrupted", run.stderr


def test_solves_in_another_thread():
    problem = random_problem(5, nodes=6, density=0.8)
    results = []
    worker = threading.Thread(target=lambda: results.append(solve(problem, "toulbar2")))
    worker.start()
    worker.join()
    assert results[0].cost == brute_force(problem)[0]


@pytest.mark.parametrize(("param", "value"), [("scale", 0), ("scale", "x"), ("seed", -1), ("presolve", 1),
                                              ("vac", "yes")])
def test_bad_parameters_name_the_parameter(param, value):
    with pytest.raises(SolverError, match=param):
        Toulbar2Solver(**{param: value}).solve(random_problem(0, nodes=2))
