"""Solvers for the node/edge cost problem. Pure Python: nothing here imports TVM, Ray or MLflow.

Importing the package registers the built-in solvers (``auto``, ``dp``, ``pbqp``, ``ilp``, ``toulbar2``, ``greedy``) in
``SOLVERS``; ``solvers.formats`` reads and writes toulbar2's ``.wcsp`` and ``.cfn`` and UAI files.
"""

from solvers import auto, dp, greedy, ilp, pbqp, toulbar2  # noqa: F401 - each module registers its solver (it imports base first)
from solvers.base import SOLVERS, Solution, Solver, make_solver, solve
from solvers.errors import SolverError
from solvers.problem import Edge, Node, Problem, ProblemError

__all__ = [
    "SOLVERS",
    "Edge",
    "Node",
    "Problem",
    "ProblemError",
    "Solution",
    "Solver",
    "SolverError",
    "make_solver",
    "solve",
]
