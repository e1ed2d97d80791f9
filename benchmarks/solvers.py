"""Solver benchmark on the synthetic instances: cost, gap to the best lower bound, seconds and status per solver.

Instances: a 1000-node chain, the SSD-like and the DenseNet-201-like problems and the DenseNet-BC-like problem of the
second generator (``solvers/dense_blocks.py``), each with 5, 8 and 10 candidates per operator (seed 0). Solvers: auto,
dp, pbqp, ilp, toulbar2 (the exact ones with ``--time-limit`` seconds, 60 by default) and greedy, plus the LP bound.
The gap is measured against the best lower bound of the instance (the LP bound, every solver's proven bound, every
proven optimum); "vs best" against the cheapest solution any solver found. The full run takes a few minutes (ilp on
the DenseNet-like ones); ``--quick`` runs k = 8 only with a 5 s limit as a smoke test.

    python benchmarks/solvers.py [--quick] [--instances chain,ssd,densenet,blocks] [--candidates 5,8,10]
                                 [--time-limit 60] [--seed 0] [--out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and this file would shadow the ``solvers`` package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from experiments.compare import LEGEND, Row, compare, format_table  # noqa: E402
from solvers.generators import generate  # noqa: E402

INSTANCES = {"chain": ("chain-1000", {"nodes": 1000}), "ssd": ("ssd-like", {}), "densenet": ("densenet201-like", {}),
             "blocks": ("densenet-bc-like", {})}
SOLVERS = ("auto", "dp", "pbqp", "ilp", "toulbar2", "greedy")
TIMED = ("auto", "ilp", "toulbar2")
"""The solvers given ``--time-limit`` (the others end on their own in well under a second here)."""


def run(instances: Sequence[str], candidates: Sequence[int], *, time_limit: float, seed: int) -> list[Row]:
    """Every solver and the LP bound on every instance; progress goes to stderr."""
    rows: list[Row] = []
    settings = {name: {"time_limit": time_limit} if name in TIMED else {} for name in SOLVERS}
    for kind in instances:
        label, params = INSTANCES[kind]
        for k in candidates:
            problem = generate(kind, seed=seed, candidates=k, **params)
            print(f"{label} k={k}: {problem.num_nodes} nodes, {len(problem.edges)} edges", file=sys.stderr, flush=True)
            rows += compare(problem, settings, instance=f"{label} k={k}")
    return rows


def targets(rows: Sequence[Row], time_limit: float) -> list[str]:
    """One line per target of the solver work, with the measured figures that meet or miss it."""
    out = []
    for row in rows:
        fast = row.seconds < 2.0
        if row.instance.startswith(("chain", "ssd")) and row.solver in ("dp", "ilp"):
            met = row.status == "optimal" and fast
            out.append(f"- {row.instance}, {row.solver}: proven optimal in < 2 s: {_yes(met)} ({_said(row)})")
        elif row.instance.startswith("densenet") and row.solver == "pbqp":
            met = row.vs_best is not None and row.vs_best <= 0.01 and row.seconds < 0.5
            out.append(f"- {row.instance}, pbqp: within 1% of the best known in < 0.5 s: {_yes(met)} ({_said(row)})")
        elif row.instance.startswith("densenet") and row.solver == "ilp":
            gap = "-" if row.gap is None else f"{100 * row.gap:.2f}%"
            out.append(f"- {row.instance}, ilp after a {time_limit:g} s limit: gap {gap} ({_said(row)})")
    return out


def _yes(met: bool) -> str:
    return "yes" if met else "**no**"


def _said(row: Row) -> str:
    vs_best = "-" if row.vs_best is None else f"{100 * row.vs_best:.2f}%"
    return f"{row.status[:60]}, {row.seconds:.2f} s, {vs_best} above the best known"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="k = 8 only and a 5 s limit (a smoke run)")
    parser.add_argument("--instances", default=",".join(INSTANCES),
                        help="comma-separated: chain, ssd, densenet, blocks")
    parser.add_argument("--candidates", default=None, help="comma-separated candidate counts (default: 5,8,10)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="time limit of auto, ilp and toulbar2 in seconds (default: 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the markdown report to this file")
    args = parser.parse_args(argv)
    instances = [name.strip() for name in args.instances.split(",") if name.strip()]
    unknown = [name for name in instances if name not in INSTANCES]
    if unknown:
        parser.error(f"unknown instance(s) {', '.join(unknown)}; choose from {', '.join(INSTANCES)}")
    default_k = "8" if args.quick else "5,8,10"
    try:
        candidates = [int(k) for k in (args.candidates or default_k).split(",")]
    except ValueError:
        parser.error(f"--candidates must be comma-separated integers, got {args.candidates!r}")
    time_limit = args.time_limit if args.time_limit is not None else 5.0 if args.quick else 60.0

    rows = run(instances, candidates, time_limit=time_limit, seed=args.seed)
    report = [
        "# Solver benchmark",
        "",
        "`" + " ".join(["python benchmarks/solvers.py", *(sys.argv[1:] if argv is None else argv)]) + "`",
        f"on {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; seed {args.seed}, "
        f"time limit {time_limit:g} s (auto, ilp, toulbar2). Costs and bounds in microseconds of the synthetic cost "
        "model.",
        "",
        format_table(rows, markdown=True),
        "",
        LEGEND,
        "",
        "## Targets",
        "",
        *targets(rows, time_limit),
    ]
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
