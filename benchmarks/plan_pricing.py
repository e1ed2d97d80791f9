"""Where a tune's prediction of its plan misses: each kernel node of the final plan, its price against its time now.

For a ``tessera tune`` output folder (``--out``) and its cost cache, the final plan's artifact is profiled inside the
network (``--profiles`` times, ``search.profile``); each kernel node's price in the solved problem (its kernel and
chain, as ``summary.json``'s problem file holds it) is set against its in-network time (the median over the
profiles), split by how the calibrated source priced the kernel: by an in-network time of its own (a calibration
profile ran it) or by its isolated time scaled by a factor. A plan re-solved on calibrated costs is priced largely
by scaled tasks the solver picked because they looked cheap; where these run further above their price than the
profiled ones, the plan's prediction is flattered. Then, from the cache's in-network records, the in-network over
isolated ratio of the profiled kernels, those of the uniform baselines apart from the others (which a solver chose:
``cost_models.calibration.Factors`` prices the tasks no profile ran by the latter where there are enough). With
``--retime``, the plan's kernels are also timed again alone (into a temporary cache, as the tune timed them): kernels
the solver picked because their records looked cheap run above their records more than the others. Last, the final
prediction's error split into the kernels' (with their chains), the transforms', the unpriced time's and the drift
between the tune's final timing and the profiles (``cost_models.prediction_error``; the calibrated problem's task
prices read off the cache as ``tune`` priced them, scaled by the prediction's window). Nothing is written; run with
nothing else on the machine.

    python benchmarks/plan_pricing.py --tune OUT --cache costs.sqlite --profiles 3 --retime
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and the file solvers.py would shadow the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
from collections import defaultdict  # noqa: E402

from benchmarks import tune_folder  # noqa: E402
from cost_models.cache import Context, CostCache  # noqa: E402
from cost_models.calibration import CalibratedCosts, network_context, network_times  # noqa: E402
from cost_models.measure import MeasuredCosts  # noqa: E402
from cost_models.prediction_error import PARTS, split_error  # noqa: E402
from cost_models.pricing import chain_task, measurement_tasks, plan_assignment  # noqa: E402
from cost_models.sources import MeasuredSource  # noqa: E402
from cost_models.tasks import KernelTask  # noqa: E402
from search.artifact import load_artifact  # noqa: E402
from search.candidates import kernel_spec  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import KernelKind, get_kind  # noqa: E402
from search.plan import baseline_plan, validate  # noqa: E402
from search.profile import profile_artifact  # noqa: E402
from search.space import tuning_space  # noqa: E402
from solvers import Problem  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tune_folder.add_arguments(parser)
    parser.add_argument("--profiles", type=int, default=3, help="profiles of the plan (10 runs each)")
    parser.add_argument("--retime", action="store_true", help="time the plan's kernels again alone")
    args = parser.parse_args()
    tune_folder.check(parser, args, ("summary.json", "problem.json", "artifact"))
    if args.profiles < 1:
        parser.error("--profiles is at least 1")
    return args


def spread(values: list[float]) -> str:
    """Median and 10-90% range of ``values``."""
    ordered = sorted(values)
    return (f"{statistics.median(ordered):.3f} ({ordered[len(ordered) // 10]:.2f}-"
            f"{ordered[9 * len(ordered) // 10]:.2f})")


def retime(kernels: dict[str, KernelTask], profiled: set[str], cache: CostCache, context: Context,
           summary: dict) -> None:
    """Time ``kernels`` again alone (a temporary cache) and set them against their records, by how they were priced."""
    records = cache.get_many(context, kernels)
    tasks = [task for key, task in kernels.items() if key in records and records[key].ok]
    target = make_target(summary["threads"], summary["target"].get("mcpu"))
    with tempfile.TemporaryDirectory() as folder:
        provider = MeasuredSource(context.timing).open(Path(folder) / "again.sqlite", target, summary["threads"], None)
        try:
            again = {task.key: record for task, record in zip(tasks, provider.measure(tasks)) if record.ok}
        finally:
            provider.close()
    print("\n| priced by | kernels | records ms | timed again ms | again / records | per kernel: median (10-90%) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for way, own in (("its own in-network time", True), ("a scaled isolated time", False)):
        keys = [key for key in again if (key in profiled) == own]
        if keys:
            then, now = sum(records[key].median_ms for key in keys), sum(again[key].median_ms for key in keys)
            print(f"| {way} | {len(keys)} | {then:.2f} | {now:.2f} | {now / then:.3f} | "
                  f"{spread([again[key].median_ms / records[key].median_ms for key in keys])} |")


def final_split(summary: dict, graph, space: dict, choices: dict, profiles: list, cache: Path, context: Context,
                problem: Problem) -> None:
    """The final prediction's error by part (``cost_models.prediction_error``), the median over ``profiles``."""
    plan = summary["plan"]
    window = plan.get("window") or 1.0
    target = make_target(summary["threads"], summary["target"].get("mcpu"))
    tasks = [task for task in measurement_tasks(graph, space) if not task.free]
    with MeasuredCosts(CostCache(cache), target=target, threads=summary["threads"], timing=context.timing) as measured:
        records = CalibratedCosts(measured).measure(tasks)
    prices = {task: record.median_ms for task, record in zip(tasks, records) if record.ok}
    names = {node: candidate.name for node, candidate in choices.items()}
    cost = problem.evaluate(plan_assignment(problem, names))
    before_window = plan.get("predicted_calibration_window_ms", plan["predicted_ms"])
    scaled = {task: ms * window for task, ms in prices.items()}
    splits = [split_error(graph, space, scaled, (before_window - cost) * window, choices, profile,
                          plan["latency"]["median_ms"]).relative() for profile in profiles]
    print(f"\nThe final prediction ({plan['predicted_ms']:.3f} ms: the calibrated problem's {cost:.3f} ms and "
          f"{before_window - cost:.3f} ms unpriced, x{window:.3f}) against the measured median "
          f"{plan['latency']['median_ms']:.3f} ms, by part (% of it; drift: the profiles' runs against the timing):\n")
    print("| " + " | ".join(PARTS) + " | total |")
    print("|" + " ---: |" * (len(PARTS) + 1))
    print("| " + " | ".join(f"{100 * statistics.median(s[part] for s in splits):+.1f}%" for part in (*PARTS, "total"))
          + " |")


def main() -> None:
    args = parse_args()
    summary, graph, _, _ = tune_folder.load(args.tune)
    artifact = load_artifact(args.tune / "artifact")
    choices = validate(artifact.plan, graph)
    problem = json.loads((args.tune / "problem.json").read_text())
    price = {node["name"]: dict(zip(node["candidates"], node["costs"])) for node in problem["nodes"]}
    runs = [profile_artifact(artifact, runs=10) for _ in range(args.profiles)]
    profiles = [network_times(graph, choices, profile) for profile in runs]
    context = Context(**summary["measurements"]["context"])
    cache = CostCache(args.cache, read_only=True)
    nodes = {}
    for op in graph.tunable:
        if op.name in choices and isinstance(get_kind(op.kind), KernelKind):
            tasks = [KernelTask(kernel_spec(op, choices[op.name])), chain_task(graph, op.name, choices[op.name])]
            now = statistics.median(sum(times.get(task, 0.0) for task in tasks if task is not None)
                                    for times in profiles)
            nodes[op.name] = (tasks[0], price[op.name][artifact.plan.choices[op.name]], now)
    profiled = cache.get_many(network_context(context), [task.key for task, _, _ in nodes.values()])
    print(f"Host: {host().cpu} ({HOST.name}); {summary['threads']} threads")
    print(f"{summary['model']}: {len(nodes)} kernel nodes of the final plan; predicted "
          f"{summary['plan']['predicted_ms']:.2f} ms, measured {summary['plan']['latency']['median_ms']:.2f} ms")
    print("\n| priced by | nodes | priced ms | in network now ms | now / priced | per node: median (10-90%) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for way, own in (("its own in-network time", True), ("a scaled isolated time", False)):
        rows = [(p, now) for task, p, now in nodes.values() if (task.key in profiled) == own and p > 0]
        if rows:
            priced, now = sum(p for p, _ in rows), sum(now for _, now in rows)
            print(f"| {way} | {len(rows)} | {priced:.2f} | {now:.2f} | {now / priced:.3f} | "
                  f"{spread([now / p for p, now in rows])} |")
    if args.retime:
        retime({task.key: task for task, _, _ in nodes.values()}, set(profiled), cache, context, summary)
    searched = summary["problem"]
    space = tuning_space(graph, layouts=searched["layouts"], space_size=searched["space_size"],
                         baselines=tuple(summary["baselines"]), precision=searched["precision"])
    kernels = {task.key: task for op in graph.tunable if isinstance(get_kind(op.kind), KernelKind)
               for task in (KernelTask(kernel_spec(op, candidate)) for candidate in space[op.name])}
    baselines = {KernelTask(kernel_spec(graph.op(node), candidate)).key for name in summary["baselines"]
                 for node, candidate in validate(baseline_plan(graph, name), graph).items()
                 if isinstance(get_kind(graph.op(node).kind), KernelKind)}
    isolated = cache.get_many(context, kernels)
    ratios = defaultdict(list)
    for key, record in cache.get_many(network_context(context), kernels).items():
        if record.ok and key in isolated and isolated[key].ok and isolated[key].median_ms > 0:
            ratios["a uniform baseline's" if key in baselines else "a solver's plan's only"].append(
                record.median_ms / isolated[key].median_ms)
    print("\n| profiled kernels | count | in network / isolated: median (10-90%) |")
    print("| --- | ---: | --- |")
    for group, values in sorted(ratios.items()):
        print(f"| {group} | {len(values)} | {spread(values)} |")
    final_split(summary, graph, space, choices, runs, args.cache, context, Problem.from_dict(problem))


if __name__ == "__main__":
    main()
