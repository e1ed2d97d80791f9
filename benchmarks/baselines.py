"""End-to-end latency of the uniform baseline plans (all NCHW, all NHWC, all NCHW16c) at batch 1.

Each plan is exported once (numerically checked), then the artifacts are timed in rounds, A B C A B C ..., each timing
in a fresh ``tessera run`` process so that the TVM thread pool has exactly ``--threads`` threads and machine drift
spreads over every plan alike. Prints one markdown row per (model, plan): median of the round medians, and the
smallest and largest round median.

    .venv/bin/python benchmarks/baselines.py                       # resnet50 and densenet121 at 224, 2 threads
    .venv/bin/python benchmarks/baselines.py --models resnet18 --image-size 64 --rounds 2   # a quick check
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.export import export, reference_outputs  # noqa: E402
from search.graph import extract_graph  # noqa: E402
from search.host import make_target  # noqa: E402
from search.plan import BASELINES, Plan, baseline_plan  # noqa: E402
from search.zoo import load_model  # noqa: E402


def time_artifact(directory: Path, threads: int, repeat: int) -> dict:
    """One ``tessera run`` in a fresh process; its JSON latency record."""
    command = [sys.executable, "-m", "experiments.cli", "run", str(directory), "--threads", str(threads),
               "--repeat", str(repeat), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "densenet121"])
    parser.add_argument("--image-size", type=int, default=None, help="default: each model's own")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="timings of each plan, interleaved")
    parser.add_argument("--repeat", type=int, default=10, help="repeats inside one timing")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="tessera-baselines-"))
    artifacts: dict[tuple[str, str], Path] = {}
    for model in args.models:
        model_args = {"batch": 1, "image_size": args.image_size, "seed": 0}
        graph = extract_graph(load_model(model, **model_args))
        target = make_target(args.threads)
        reference = reference_outputs(graph, target, model_args["seed"])
        for name in BASELINES:
            start = time.perf_counter()
            plan = Plan(baseline_plan(graph, name).choices, model, model_args)
            compiled = export(graph, plan, target=target, threads=args.threads, reference=reference)
            directory = compiled.save(work / f"{model}-{name}")
            artifacts[(model, name)] = directory
            print(f"exported {model} {name} in {time.perf_counter() - start:.0f} s", file=sys.stderr)

    medians: dict[tuple[str, str], list[float]] = {key: [] for key in artifacts}
    threads_seen: set[int] = set()
    for round_index in range(args.rounds):
        for key, directory in artifacts.items():
            record = time_artifact(directory, args.threads, args.repeat)
            medians[key].append(record["median_ms"])
            threads_seen.add(record["runtime_threads"])
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    print(f"threads requested {args.threads}, used by the runtime {sorted(threads_seen)}; "
          f"{args.rounds} interleaved rounds x {args.repeat} repeats")
    print("| model | plan | median ms | min .. max of round medians | vs best baseline |")
    print("| --- | --- | --- | --- | --- |")
    for model in args.models:
        rows = {name: medians[(model, name)] for name in BASELINES}
        best = min(statistics.median(v) for v in rows.values())
        for name, values in rows.items():
            median = statistics.median(values)
            print(f"| {model} | {name} | {median:.2f} | {min(values):.2f} .. {max(values):.2f} | "
                  f"{median / best:.2f}x |")


if __name__ == "__main__":
    main()
