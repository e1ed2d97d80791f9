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


# ---------------------------------------------------------------------------------------------------- generate
def _add_generate(sub: argparse._SubParsersAction) -> None:
    from solvers.generators import GENERATORS

    p = sub.add_parser("generate", help="write a seeded synthetic problem shaped like a real network")
    p.add_argument("kind", choices=list(GENERATORS), help="chain, densenet (DenseNet-201-like), ssd or random")
    p.add_argument("--seed", type=int, required=True, help="random seed (same seed, same file)")
    p.add_argument("--nodes", type=int, default=None, help="number of nodes, for chain (1000) and random (200)")
    p.add_argument("--candidates", type=int, default=8, help="candidates per tunable operator (default: 8)")
    p.add_argument("--out", required=True, help="problem JSON file to write")
    p.set_defaults(run=_run_generate)


def _run_generate(args: argparse.Namespace) -> int:
    from solvers.generators import generate

    problem = generate(args.kind, seed=args.seed, nodes=args.nodes, candidates=args.candidates)
    problem.save(args.out)
    print(f"wrote {args.out}: {args.kind}, {problem.num_nodes} nodes, {len(problem.edges)} edges")
    return 0


# ---------------------------------------------------------------------------------------------------- demo
def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="solve the embedded DenseNet-201-like and SSD-like problems with every solver")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds for the ilp solver (default: 10)")
    p.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from experiments.compare import LEGEND, compare, format_table
    from solvers.generators import generate

    settings = {"dp": {}, "pbqp": {}, "ilp": {"time_limit": args.time_limit}, "greedy": {}}
    rows = []
    for kind, label in (("densenet", "densenet201-like"), ("ssd", "ssd-like")):
        problem = generate(kind, seed=0, candidates=8)
        print(f"{label}: {problem.num_nodes} nodes, {len(problem.edges)} edges, 8 candidates per operator", flush=True)
        rows += compare(problem, settings, instance=label)
    print()
    print(format_table(rows))
    print(f"\ncost and bound in microseconds of the synthetic cost model; {LEGEND}")
    return 0


# ---------------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tessera", description="Per-operator layout and schedule search for deep-learning networks."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_solve(sub)
    _add_generate(sub)
    _add_demo(sub)
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
