"""The ``tessera`` command line: a thin layer over the Python API.

Each subcommand has a ``_add_<name>`` function that declares its arguments and a ``_run_<name>`` function that calls
public functions only. Errors a user can cause (bad files, unknown names, impossible plans) end as one
``error: ...`` line and exit code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from solvers.base import SolverError
from solvers.problem import ProblemError

USAGE_ERROR = 2


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input rather than a bug in tessera."""
    from search.errors import SearchError

    return (ProblemError, SolverError, SearchError, FileNotFoundError, PermissionError)


# ---------------------------------------------------------------------------------------------------- solve
def _add_solve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="solve a problem JSON file and print the solution as JSON")
    p.add_argument("problem", help="problem JSON file (format in the README)")
    p.add_argument("--solver", default="pbqp", help="dp, pbqp, ilp or greedy (default: pbqp)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds the solver may spend")
    p.add_argument("--bound", action="store_true", help="also compute the LP lower bound of the local polytope")
    p.add_argument("--out", help="write the plan (node -> candidate) and the solution to this JSON file")
    p.set_defaults(run=_run_solve)


def _run_solve(args: argparse.Namespace) -> int:
    from solvers import Problem, solve
    from solvers.problem import write_json_atomic

    problem = Problem.load(args.problem)
    params = {} if args.time_limit is None else {"time_limit": args.time_limit}
    solution = solve(problem, args.solver, bound=args.bound, **params)
    result = solution.to_dict()
    if args.out:
        write_json_atomic(args.out, result)
    print(json.dumps(result))
    if not solution.assignment:
        print(f"error: {args.solver} found no finite-cost assignment (status: {solution.status})", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tessera", description="Per-operator layout and schedule search for deep-learning networks."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_solve(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except _user_errors() as exc:
        if args.debug:
            raise
        message = str(exc) if not isinstance(exc, OSError) else f"{exc.filename}: {exc.strerror}"
        print(f"error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
