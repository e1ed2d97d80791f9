"""How much one kernel record varies between measurements, timed in one pass or in passes (``MeasuredCosts(passes=)``).

The tasks: resnet50's convolutions (batch 1, 224x224), each in NCHW16c -> NCHW16c with its default knobs, as the
cost cache records them (``context`` timing). Each round builds and times all of them again
(``MeasuredCosts.time_again``: the cache neither read nor written) once with every ``--passes`` setting, the
settings taking turns so that they see the same windows of the host. Per setting it prints, over the tasks, the
median and the largest ratio of a task's slowest record to its fastest (over the rounds), and the share of records
more than 10% above the fastest record any setting took of the task: the records a slow window inflated. Run it
with nothing else on the machine.

    .venv/bin/python benchmarks/measure_passes.py --threads 2 --rounds 5
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
from cost_models.pricing import kernel_task  # noqa: E402
from search.candidates import Candidate, default_knobs  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if args.rounds < 2 or min(args.passes) < 1:
        parser.error("--rounds at least 2, --passes positive")
    tasks, target = resnet50_tasks(), make_target(args.threads)
    records: dict[int, list[list[float]]] = {p: [] for p in args.passes}
    seconds: dict[int, float] = dict.fromkeys(args.passes, 0.0)
    with tempfile.TemporaryDirectory() as scratch:
        providers = {p: MeasuredCosts(CostCache(Path(scratch) / f"{p}.sqlite"), target=target, threads=args.threads,
                                      passes=p) for p in args.passes}
        try:
            for index in range(args.rounds):
                order = args.passes[index % len(args.passes):] + args.passes[:index % len(args.passes)]
                for p in order:
                    start = time.perf_counter()
                    records[p].append([r.median_ms for r in providers[p].time_again(tasks)])
                    seconds[p] += time.perf_counter() - start
                sums = ", ".join(f"{p} passes {sum(records[p][-1]):.2f} ms" for p in args.passes)
                print(f"round {index + 1} of {args.rounds}: {sums} in all; load {os.getloadavg()[0]:.2f}",
                      file=sys.stderr)
        finally:
            for provider in providers.values():
                provider.close()
    best = [min(records[p][r][t] for p in args.passes for r in range(args.rounds)) for t in range(len(tasks))]
    print(f"{host().cpu}, vector unit {HOST.name}, {args.threads} threads; {len(tasks)} resnet50 convolutions in "
          f"{LAYOUT}, {args.rounds} rounds\n")
    print("| passes | median slowest/fastest | largest | records > 1.10x the best | seconds per round |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for p in args.passes:
        ratios = [max(r[t] for r in records[p]) / min(r[t] for r in records[p]) for t in range(len(tasks))]
        inflated = sum(r[t] > INFLATED * best[t] for r in records[p] for t in range(len(tasks)))
        print(f"| {p} | {statistics.median(ratios):.3f} | {max(ratios):.3f} | "
              f"{inflated} of {len(tasks) * args.rounds} | {seconds[p] / args.rounds:.1f} |")


if __name__ == "__main__":
    main()
