"""How much one kernel record varies between measurements, timed in one pass or in passes (``MeasuredCosts(passes=)``),
with or without the next batch building beside the timing (``MeasuredCosts(overlap=)``).

The tasks: resnet50's convolutions (batch 1, 224x224), each in NCHW16c -> NCHW16c with its default knobs, as the
cost cache records them (``context`` timing). Each round builds and times all of them again
(``MeasuredCosts.time_again``: the cache neither read nor written) once with every setting (each ``--passes`` with
each ``--overlap``), the settings taking turns so that they see the same windows of the host. Per setting it prints,
over the tasks, the median and the largest ratio of a task's slowest record to its fastest (over the rounds), the
share of records more than 10% above the fastest record any setting took of the task (the records a slow window
inflated), and the median ratio of a task's median record to its median under the first setting. ``--model`` times
the first ``--limit`` tasks of a network's default space instead (kernels, chains and layout transforms).
Overlapping needs a core beside the timing threads (``--threads`` below the usable cores). Run it with nothing else
on the machine.

    .venv/bin/python benchmarks/measure_passes.py --threads 2 --rounds 5
    .venv/bin/python benchmarks/measure_passes.py --threads 1 --passes 2 --overlap off on --rounds 6
    .venv/bin/python benchmarks/measure_passes.py --threads 1 --passes 2 --overlap off on --model resnet18 --limit 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.cache import CostCache  # noqa: E402
from cost_models.measure import MeasuredCosts  # noqa: E402
from cost_models.pricing import kernel_task, measurement_tasks  # noqa: E402
from search.candidates import Candidate, candidate_space, default_knobs  # noqa: E402
from search.graph import extract_graph  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.zoo import load_model  # noqa: E402

LAYOUT = "NCHW16c"
INFLATED = 1.10


def resnet50_tasks() -> list:
    """One kernel task per distinct convolution of resnet50, in NCHW16c with default knobs."""
    graph = extract_graph(load_model("resnet50"))
    tasks = []
    for op in graph.tunable:
        if op.kind == "conv2d" and op.input_shapes[0][1] % 16 == 0:
            candidate = Candidate(LAYOUT, LAYOUT, default_knobs(op, LAYOUT, LAYOUT))
            tasks.append(kernel_task(graph, op.name, candidate))
    return list(dict.fromkeys(tasks))


def space_tasks(model: str, limit: int) -> list:
    """The first ``limit`` distinct tasks (kernels, chains, transforms) of ``model``'s default candidate space."""
    graph = extract_graph(load_model(model))
    return measurement_tasks(graph, candidate_space(graph))[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--overlap", choices=["off", "on"], nargs="+", default=["off"])
    parser.add_argument("--model", help="time the first --limit tasks of this network's space instead")
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    if args.rounds < 2 or min(args.passes) < 1:
        parser.error("--rounds at least 2, --passes positive")
    if "on" in args.overlap and args.threads >= len(os.sched_getaffinity(0)):
        parser.error("--overlap on needs --threads below the usable cores")
    settings = [(p, o) for p in args.passes for o in dict.fromkeys(args.overlap)]
    tasks, target = space_tasks(args.model, args.limit) if args.model else resnet50_tasks(), make_target(args.threads)
    records: dict[tuple, list[list[float]]] = {s: [] for s in settings}
    seconds: dict[tuple, float] = dict.fromkeys(settings, 0.0)
    with tempfile.TemporaryDirectory() as scratch:
        providers = {s: MeasuredCosts(CostCache(Path(scratch) / f"{s[0]}-{s[1]}.sqlite"), target=target,
                                      threads=args.threads, passes=s[0], overlap=s[1] == "on") for s in settings}
        try:
            for index in range(args.rounds):
                for s in settings[index % len(settings):] + settings[:index % len(settings)]:
                    start = time.perf_counter()
                    records[s].append([r.median_ms for r in providers[s].time_again(tasks)])
                    seconds[s] += time.perf_counter() - start
                sums = ", ".join(f"{label(s)} {sum(records[s][-1]):.2f} ms" for s in settings)
                print(f"round {index + 1} of {args.rounds}: {sums} in all; load {os.getloadavg()[0]:.2f}",
                      file=sys.stderr)
        finally:
            for provider in providers.values():
                provider.close()
    count = range(len(tasks))
    best = [min(records[s][r][t] for s in settings for r in range(args.rounds)) for t in count]
    medians = {s: [statistics.median(r[t] for r in records[s]) for t in count] for s in settings}
    what = f"the first {len(tasks)} tasks of {args.model}'s space" if args.model else \
        f"{len(tasks)} resnet50 convolutions in {LAYOUT}"
    print(f"{host().cpu}, vector unit {HOST.name}, {args.threads} threads; {what}, {args.rounds} rounds\n")
    print("| setting | median slowest/fastest | largest | records > 1.10x the best | median / first setting's "
          "| seconds per round |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for s in settings:
        ratios = [max(r[t] for r in records[s]) / min(r[t] for r in records[s]) for t in count]
        inflated = sum(r[t] > INFLATED * best[t] for r in records[s] for t in count)
        against = statistics.median(medians[s][t] / medians[settings[0]][t] for t in count)
        print(f"| {label(s)} | {statistics.median(ratios):.3f} | {max(ratios):.3f} | "
              f"{inflated} of {len(tasks) * args.rounds} | {against:.3f} | {seconds[s] / args.rounds:.1f} |")


def label(setting: tuple[int, str]) -> str:
    passes, overlap = setting
    return f"{passes} passes" + (", builds beside" if overlap == "on" else "")


if __name__ == "__main__":
    main()
