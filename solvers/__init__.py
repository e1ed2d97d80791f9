"""Solvers for the node/edge cost problem. Pure Python: nothing here imports TVM, Ray or MLflow."""

from solvers.base import SOLVERS, Solution, Solver, SolverError, make_solver, solve
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
