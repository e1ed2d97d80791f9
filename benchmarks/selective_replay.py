"""Selective measurement replayed on a fully measured cache: what it asks for and the plan it ends on, at full prices.

For each ``--run MODEL=CACHE`` (a network's whole default space measured in ``CACHE``, as ``tune --costs measured``
or ``benchmarks/tune_time.py``'s full variant leaves it), ``cost_models.selective.price_selectively`` prices the
space from an empty cache with the shipped model (or ``--cost-model``), its "measurements" replayed from ``CACHE``
(``benchmarks/costmodel.Replay``). The same timings price both problems, so the comparison isolates the choice of
what to measure from the noise between two runs: nothing is built or timed, and the replay is deterministic.

``--initial``, ``--margin`` and ``--quantile`` change what is measured first and how the bounds are set
(``cost_models.selective``), for ablations. Printed per network: tasks asked of the space, solve rounds, the seconds
it took, and the selective plan's cost under the fully measured problem over that problem's optimum (1.0000:
selective found a plan as good as full measurement does), and the optimal plan's tasks it never measured, with those
among them whose bound failed (the task ran faster than bounded: each can hide a better plan). To replay a network
the model must not have seen, train one without it (``tessera costmodel train --models ...``) and give it with
``--cost-model``.

    .venv/bin/python benchmarks/selective_replay.py --run resnet50=W/resnet50/full/costs.sqlite --threads 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.costmodel import Replay  # noqa: E402
from cost_models import CostCache  # noqa: E402
from cost_models.pricing import build_problem, plan_cost  # noqa: E402
from cost_models.selective import (  # noqa: E402
    INITIAL,
    MARGIN,
    QUANTILE,
    SelectiveCosts,
    plan_tasks,
    price_selectively,
)
from cost_models.shipped import shipped_model  # noqa: E402
from cost_models.xgb_model import XGBCostModel  # noqa: E402
from experiments.extraction import load_network  # noqa: E402
from search import space as spaces  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.zoo import MODELS  # noqa: E402
from solvers import solve  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, metavar="MODEL=CACHE",
                        help="a zoo name or .onnx file and the cache holding its whole default space (repeatable)")
    parser.add_argument("--threads", type=int, default=2, help="the threads the cache's records were timed with")
    parser.add_argument("--cost-model", type=Path, help="a regression model file (default: the shipped one)")
    parser.add_argument("--initial", type=int, default=INITIAL,
                        help=f"best-predicted tasks of each node measured first (default {INITIAL})")
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help=f"and those predicted within this share of the node's best (default {MARGIN})")
    parser.add_argument("--quantile", type=float, default=QUANTILE,
                        help=f"of measured over predicted time, the bound's factor (default {QUANTILE})")
    parser.add_argument("--solver", default="auto")
    args = parser.parse_args()
    if any("=" not in run for run in args.run):
        parser.error("each --run is MODEL=CACHE")
    args.runs = [(run.split("=", 1)[0], Path(run.split("=", 1)[1])) for run in args.run]
    if args.initial < 1 or args.margin < 0 or not 0 < args.quantile < 1:
        parser.error("--initial is at least 1, --margin at least 0 and --quantile between 0 and 1")
    for name, cache in args.runs:
        if name not in MODELS:
            parser.error(f"unknown model {name!r}: a zoo network ({', '.join(MODELS)})")
        if not cache.is_file():
            parser.error(f"no cache at {cache}")
    return args


def replay(model_name: str, cache: Path, model: XGBCostModel, args: argparse.Namespace, scratch: Path) -> str:
    """One network's replay as a markdown table row."""
    threads, solver = args.threads, args.solver
    graph, label, _ = load_network(model_name)
    space = spaces.tuning_space(graph, layouts=spaces.parse_layouts(spaces.DEFAULT_LAYOUTS),
                                space_size=spaces.DEFAULT_SPACE_SIZE)
    target = make_target(threads)
    full = Replay(CostCache(scratch / f"{label}-full.sqlite"), CostCache(cache, read_only=True), target=target,
                  threads=threads)
    reference = build_problem(graph, space, full.measure)
    best = solve(reference, solver)
    optimum = {node: best.assignment[node] for node in space}
    replayed = Replay(CostCache(scratch / f"{label}.sqlite"), CostCache(cache, read_only=True), target=target,
                      threads=threads)
    provider = SelectiveCosts(replayed, model, quantile=args.quantile)
    start = time.perf_counter()
    problem = price_selectively(provider, graph, space, provider.measure, solver=solver, initial=args.initial,
                                margin=args.margin)
    seconds = time.perf_counter() - start
    plan = {node: solve(problem, solver).assignment[node] for node in space}
    stats = dict(provider.stats)
    tasks = list({task.key: task for task in plan_tasks(graph, space, optimum) if not task.free}.values())
    times = dict(zip((task.key for task in tasks), full.measure(tasks)))
    unmeasured = [task for task in tasks if task.key not in provider.known]
    bounds = dict(zip((task.key for task in unmeasured), provider.measure(unmeasured)))
    failed = [task for task in unmeasured
              if times[task.key].ok and bounds[task.key].median_ms > times[task.key].median_ms]
    return (f"| {label} | {stats['measured']} of {stats['tasks']} | {stats['rounds']} | {seconds:.1f} | "
            f"{plan_cost(reference, plan) / best.cost:.4f} | {len(unmeasured)} of {len(tasks)} | {len(failed)} |")


def main() -> int:
    args = parse_args()
    model = XGBCostModel.load(args.cost_model) if args.cost_model else shipped_model()
    print(f"Host: {host().cpu} ({HOST.name}); records timed with {args.threads} threads; "
          f"model: {args.cost_model or f'the shipped {HOST.name} model'}; initial {args.initial}, margin "
          f"{args.margin}, quantile {args.quantile}\n")
    print("| network | tasks measured | rounds | seconds | plan / optimum | optimum's tasks unmeasured | "
          "of them bounded above their time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="tessera-replay-") as scratch:
        for model_name, cache in args.runs:
            print(replay(model_name, cache, model, args, Path(scratch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
