"""The learned cost model against full measurement on one network: ranking metrics, and the plans priced by measured,
xgboost and hybrid costs, each exported and timed end to end in the same interleaved rounds as the uniform baselines.

A model is trained on ``--train`` networks' records in ``--cache`` (which must hold the ``--test`` network's whole
space too: that is the fully measured reference). The hybrid source starts from an empty cache; by default its
measurements are *replayed* from ``--cache`` (the same timings the measured problem uses, so the comparison isolates
the choice of what to measure); ``--remeasure`` times them for real instead. Prints the metrics, then per source the
share of candidates measured, the plan's predicted cost, its cost under the fully measured problem, and its latency.

    .venv/bin/python benchmarks/costmodel.py --cache costs.sqlite --train resnet50 --test densenet201
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models import CostCache, CostRecord, Task  # noqa: E402
from cost_models.learned import HybridCosts  # noqa: E402
from cost_models.measure import MeasuredCosts  # noqa: E402
from cost_models.pricing import build_problem  # noqa: E402
from cost_models.sources import XGBoostSource  # noqa: E402
from cost_models.tasks import FREE  # noqa: E402
from cost_models.xgb_model import XGBCostModel  # noqa: E402
from experiments.costmodel import evaluate_on, train  # noqa: E402
from experiments.extraction import extract  # noqa: E402
from experiments.timing import time_plans  # noqa: E402
from search import space as spaces  # noqa: E402
from search.host import make_target  # noqa: E402
from search.plan import BASELINES, baseline_plan, plan_from_assignment  # noqa: E402
from search.threads import use_threads  # noqa: E402
from solvers import solve  # noqa: E402


class Replay(MeasuredCosts):
    """``MeasuredCosts`` on an empty cache whose "measurements" are the records of a fully measured one."""

    def __init__(self, empty: CostCache, full: CostCache, *, target, threads: int) -> None:
        super().__init__(empty, target=target, threads=threads)
        self.full = full

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        keys = [None if task.free else task.key for task in tasks]
        found = self.full.get_many(self.context, [k for k in keys if k is not None])
        missing = [k for k in keys if k is not None and k not in found]
        if missing:
            raise SystemExit(f"error: the reference cache lacks {len(missing)} of the test network's tasks")
        self.cache.put_many(self.context, {k: found[k] for k in keys if k is not None})
        return [FREE if k is None else found[k] for k in keys]


def hybrid_problem(args, reference, model_file: Path, threads: int, scratch: Path):
    """The test network priced by the hybrid source from an empty cache (replayed or really measured)."""
    target = make_target(threads)
    empty = CostCache(scratch / f"hybrid-{args.fraction}.sqlite")
    measured = MeasuredCosts(empty, target=target, threads=threads) if args.remeasure else \
        Replay(empty, CostCache(args.cache), target=target, threads=threads)
    space = spaces.tuning_space(reference.graph, layouts=spaces.DEFAULT_LAYOUTS, space_size=spaces.DEFAULT_SPACE_SIZE)
    with HybridCosts(measured, XGBCostModel.load(model_file), fraction=args.fraction) as provider:
        problem = build_problem(reference.graph, space, provider.measure)
        return problem, provider.stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, help="cost cache holding the train and test networks' spaces")
    parser.add_argument("--train", default="resnet50", help="comma-separated networks to train on")
    parser.add_argument("--test", default="densenet201", help="the held-out network")
    parser.add_argument("--fraction", type=float, default=0.2, help="hybrid: share of each node's candidates measured")
    parser.add_argument("--remeasure", action="store_true", help="hybrid: time its measurements for real")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved end-to-end timing rounds")
    args = parser.parse_args()
    threads = use_threads(None)
    with tempfile.TemporaryDirectory(prefix="tessera-costmodel-") as scratch:
        scratch = Path(scratch)
        model_file = scratch / "model.json"
        train(args.cache, args.train.split(","), model_file, threads=threads)
        train(args.cache, args.train.split(","), scratch / "rank.json", objective="rank", threads=threads)
        print(f"model trained on {args.train}; metrics on {args.test} (nodes of unseen workloads):\n")
        print("| objective | pairwise | top-1 | top-5 | R^2 log | nodes | left out (seen) |")
        print("|---|---|---|---|---|---|---|")
        for path in (model_file, scratch / "rank.json"):
            (row,) = evaluate_on(path, [args.test], args.cache, threads=threads)
            r2 = "-" if row["r2_log"] is None else f"{row['r2_log']:.3f}"
            print(f"| {row['objective']} | {row['pairwise_accuracy']:.3f} | {row['top1']:.3f} | {row['top5']:.3f} "
                  f"| {r2} | {row['groups']} | {row['seen_nodes_left_out']} |")

        reference = extract(args.test, cache=args.cache, threads=threads, costs="measured")
        predicted = extract(args.test, cache=args.cache, threads=threads, costs=XGBoostSource(model_file))
        hybrid, stats = hybrid_problem(args, reference, model_file, threads, scratch)
        problems = {"measured": (reference.problem, {"measured": reference.tasks, "tasks": reference.tasks}),
                    "xgboost": (predicted.problem, {"measured": 0, "tasks": predicted.tasks}),
                    f"hybrid {args.fraction:g}": (hybrid, stats)}
        plans, rows = {}, {}
        for source, (problem, counts) in problems.items():
            solution = solve(problem, "pbqp")
            plans[source] = plan_from_assignment(solution.assignment, args.test, reference.args,
                                                 auxiliary=reference.problem.meta.get("auxiliary", ()))
            rows[source] = (counts, solution.cost, reference.problem.evaluate(solution.assignment))
        for name in BASELINES:
            plans[name] = baseline_plan(reference.graph, name, args.test, reference.args)
        timed = time_plans(reference, plans, repeat=args.rounds)
    best = timed.timings["measured"].median_ms
    print(f"\n{args.test}, {threads} threads, {args.rounds} interleaved rounds (1-min load {timed.load[0]:.2f} -> "
          f"{timed.load[1]:.2f}):\n")
    print("| costs | measured | predicted plan cost (ms) | cost under measured costs (ms) | latency (ms, median) "
          "| spread (ms) | vs measured plan |\n|---|---|---:|---:|---:|---:|---:|")
    for source, (counts, predicted_cost, true_cost) in rows.items():
        latency = timed.timings[source].latency
        share = f"{counts['measured']}/{counts['tasks']} ({100 * counts['measured'] / counts['tasks']:.0f}%)"
        print(f"| {source} | {share} | {predicted_cost:.3f} | {true_cost:.3f} | {latency['median_ms']:.3f} | "
              f"{latency['spread_ms']:.3f} | {latency['median_ms'] / best:.3f}x |")
    for name in BASELINES:
        latency = timed.timings[name].latency
        print(f"| baseline {name} | - | - | {timed.timings[name].predicted_ms:.3f} | {latency['median_ms']:.3f} | "
              f"{latency['spread_ms']:.3f} | {latency['median_ms'] / best:.3f}x |")


if __name__ == "__main__":
    main()
