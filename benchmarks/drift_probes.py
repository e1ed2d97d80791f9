"""Do a tune's kernels hold their records in a later sitting? What the drift check's choice of probes rests on.

``tune``'s drift check (``cost_models.drift``) times a few kernels again and reads the machine's speed off the median
of now over their records. That only works if the probes are kernels that hold their records while the machine
does; two rules follow from sittings where some did not: the probes are the solvers' plans' kernels, not the uniform
baselines' (uniform NCHW's default kernels were seen to time up to 2x apart between sittings), and one probe a
workload (two settings of one workload were seen to move together while the others held, and decided the median).

For a ``tessera tune`` output folder (``--out``) and its cost cache, every kernel of the final plan and of the
uniform baselines with a record in the cache is timed again ``--passes`` times (into a temporary cache, as the tune
timed them; nothing is written) and set against its record. Printed: the records' age; per set (the plan's kernels,
the baselines' others) the median ratio of now over the record and its 10-90% range; how far two tasks' ratios lie
apart (``|log(a / b)|``) when the tasks are one workload and when they are not (does a workload move as one?); and
what the check would have read with each choice of probes: the plan's three longest kernels, the plan's longest of
each of the three workloads recorded longest (``cost_models.drift.probe_tasks``, the rule ``tune`` uses), the
baselines' three longest. Run with nothing else on the machine, a while after the tune.

    python benchmarks/drift_probes.py --tune OUT --cache costs.sqlite --passes 2
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages before this folder's solvers.py

import argparse  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from benchmarks import tune_folder  # noqa: E402
from benchmarks.plan_pricing import spread  # noqa: E402
from cost_models.cache import Context, CostCache, CostRecord  # noqa: E402
from cost_models.drift import PROBES, compare, probe_tasks, workload  # noqa: E402
from cost_models.sources import MeasuredSource  # noqa: E402
from cost_models.tasks import KernelTask  # noqa: E402
from search.artifact import load_artifact  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.plan import baseline_plan, validate  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tune_folder.add_arguments(parser)
    parser.add_argument("--passes", type=int, default=2, help="times every kernel is timed again (default 2)")
    args = parser.parse_args()
    tune_folder.check(parser, args, ("summary.json", "artifact"))
    if args.passes < 1:
        parser.error("--passes is at least 1")
    return args


def apart(ratios: dict[str, float], same: bool) -> str:
    """Median and 90th percentile of |log(a / b)| over pairs of tasks of one workload (``same``) or of two."""
    gaps = sorted(abs(math.log(ratios[a] / ratios[b])) for a, b in itertools.combinations(ratios, 2)
                  if (workload(a) == workload(b)) == same)
    if not gaps:
        return "- | -"
    return f"{len(gaps)} | {statistics.median(gaps):.3f} / {gaps[9 * len(gaps) // 10]:.3f}"


def main() -> None:
    args = parse_args()
    summary, graph, model, model_args = tune_folder.load(args.tune)
    plan = tune_folder.kernel_tasks(graph, validate(load_artifact(args.tune / "artifact").plan, graph))
    baselines: dict[str, KernelTask] = {}
    for name in summary["baselines"]:
        uniform = validate(baseline_plan(graph, name, model, model_args), graph)
        baselines.update(tune_folder.kernel_tasks(graph, uniform))
    context = Context(**summary["measurements"]["context"])
    records = CostCache(args.cache, read_only=True).get_many(context, [*plan, *baselines])
    measured = {key for key, record in records.items() if record.ok and record.repeats}  # not a model's prediction
    everything = {key: task for key, task in {**baselines, **plan}.items() if key in measured}
    tasks = list(everything.values())
    target = make_target(summary["threads"], summary["target"].get("mcpu"))
    passes: list[dict[str, CostRecord]] = []
    with tempfile.TemporaryDirectory() as folder:
        provider = MeasuredSource(context.timing).open(Path(folder) / "again.sqlite", target, summary["threads"], None)
        try:
            for _ in range(args.passes):
                passes.append(dict(zip(everything, provider.time_again(tasks))))
        finally:
            provider.close()
    ok = [key for key in everything if all(timed[key].ok for timed in passes)]
    ratio = {key: statistics.median(timed[key].median_ms for timed in passes) / records[key].median_ms for key in ok}
    age = statistics.median(time.time() - records[key].measured_at for key in ok) / 60
    print(f"Host: {host().cpu} ({HOST.name}); {summary['threads']} threads; {summary['model']}: {len(ok)} kernels "
          f"timed again {args.passes}x, their records {age:.0f} min old (median)\n")
    print("| kernels | count | now / record: median (10-90%) |")
    print("| --- | ---: | --- |")
    only_baselines = [key for key in ok if key not in plan]
    for label, keys in (("the plan's", [key for key in ok if key in plan]), ("the baselines' others", only_baselines)):
        if keys:
            print(f"| {label} | {len(keys)} | {spread([ratio[key] for key in keys])} |")
    print("\n| pairs of tasks | pairs | abs(log(a / b)): median / 90% |")
    print("| --- | ---: | --- |")
    print(f"| one workload | {apart(ratio, True)} |")
    print(f"| two workloads | {apart(ratio, False)} |")

    def reading(keys: list[str]) -> str:
        drift = compare(records, {key: CostRecord(ratio[key] * records[key].median_ms, None, 1) for key in keys})
        return f"x{drift.ratio:.3f}{' (disturbed)' if drift.disturbed else ''} | " + ", ".join(
            f"x{ratio[key]:.2f}" for key in keys)

    def longest(keys: list[str]) -> list[str]:
        return sorted(keys, key=lambda key: -records[key].median_ms)[:PROBES]

    in_plan = [key for key in ok if key in plan]
    print("\n| probes | the check would read | each probe now / record |")
    print("| --- | --- | --- |")
    print(f"| the plan's {PROBES} longest kernels | {reading(longest(in_plan))} |")
    chosen = [task.key for task in probe_tasks([everything[key] for key in in_plan], records)]
    print(f"| the plan's longest of each of the {PROBES} workloads recorded longest | {reading(chosen)} |")
    print(f"| the baselines' {PROBES} longest kernels | {reading(longest([key for key in ok if key in baselines]))} |")


if __name__ == "__main__":
    main()
