"""How long ``tessera tune`` takes from an empty cost cache, and where the time goes.

For each network and each variant (``--variant NAME=FLAGS``: extra ``tessera tune`` flags; default one variant,
``defaults``, with none), ``tessera tune`` runs as a user runs it, in its own process, from an empty cost cache in the
work directory (``WORK/<model>/<variant>/``). Printed per run: the whole command's wall time, the summary's phases
(measuring split into builds and timings), tasks measured, and the plan's measured latency. With several variants,
their plans are then timed again in the same interleaved rounds (``experiments.timing.interleaved_latency``, the
harness of ``tune``) and each is compared with the first variant's plan: a faster way to tune is judged by the plan it
finds, in one sitting.

Prints markdown with the host's CPU, vector unit and threads. Run it with nothing else on the machine.

    .venv/bin/python benchmarks/tune_time.py --models resnet50 inception_v3 --threads 2 --work W
    .venv/bin/python benchmarks/tune_time.py --models resnet50 --threads 2 --work W \\
        --variant full= --variant "selective=--costs selective --cost-model M.json"

``--compare-only`` times the plans of an earlier run again (same ``--work``, ``--models`` and ``--variant`` names),
e.g. with more ``--rounds`` after a noisy window; ``--earlier NAME`` takes one variant's earlier run and tunes the
others (a long full measurement compared with a new way to tune, without measuring it again).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.host import host  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.threads import use_threads  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", required=True, help="zoo names or .onnx files")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path, required=True, help="directory for the runs' caches and outputs")
    parser.add_argument("--variant", action="append", default=None, metavar="NAME=FLAGS",
                        help="a way to tune: extra tessera tune flags (repeatable; the first is the reference)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds comparing the variants' plans")
    parser.add_argument("--compare-only", action="store_true",
                        help="tune nothing: compare the plans an earlier run left in the work directory again")
    parser.add_argument("--earlier", action="append", default=[], metavar="NAME",
                        help="a variant whose earlier run in the work directory is taken, not tuned again")
    args = parser.parse_args()
    variants = args.variant or ["defaults="]
    if any("=" not in v for v in variants) or len({v.split("=", 1)[0] for v in variants}) < len(variants):
        parser.error("each --variant is NAME=FLAGS, with a name of its own")
    args.variants = {v.split("=", 1)[0]: shlex.split(v.split("=", 1)[1]) for v in variants}
    if not set(args.earlier) <= set(args.variants):
        parser.error("--earlier names a --variant")
    if min(args.threads, args.rounds) < 1:
        parser.error("--threads and --rounds must be positive")
    return args


def run_tune(model: str, flags: list[str], directory: Path, threads: int) -> dict:
    """``tessera tune`` from an empty cache in ``directory``: its summary, with the command's wall seconds."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    command = [str(Path(sys.executable).with_name("tessera")), "tune", model, "--threads", str(threads),
               "--cache", str(directory / "costs.sqlite"), "--out", str(directory / "out"), *flags]
    start = time.perf_counter()
    with open(directory / "tune.log", "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
    summary = json.loads((directory / "out" / "summary.json").read_text())
    return {**summary, "command_seconds": time.perf_counter() - start, "command": shlex.join(command)}


def earlier_run(directory: Path) -> dict:
    """The summary an earlier ``run_tune`` left in ``directory``, with its command and wall seconds."""
    summary = json.loads((directory / "out" / "summary.json").read_text())
    return {**summary, "command_seconds": summary["time"]["seconds"], "command": "(earlier run)"}


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def phase_table(runs: dict[str, dict]) -> list[str]:
    names = list(dict.fromkeys(name for run in runs.values() for name in run["time"]["phases"]))
    lines = ["| variant | whole command | tasks measured | builds | timings | "
             + " | ".join(names) + " | plan (ms) |", "| --- |" + " ---: |" * (len(names) + 5)]
    for variant, run in runs.items():
        spent, m = run["time"], run["measurements"]
        beside = spent["measure"].get("overlapped builds", 0)
        cells = [minutes(run["command_seconds"]), f"{m['new']} of {m['tasks']}",
                 f"{spent['measure'].get('builds', 0):.0f} s" + (f" (+{beside:.0f} s beside)" if beside else ""),
                 f"{spent['measure'].get('timings', 0):.0f} s",
                 *(f"{spent['phases'].get(name, 0):.1f} s" for name in names),
                 f"{run['plan']['latency']['median_ms']:.2f}"]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines


def compare_plans(runs: dict[str, dict], rounds: int, threads: int) -> list[str]:
    """The variants' plans timed in the same interleaved rounds, each against the first's."""
    from experiments.timing import interleaved_latency
    from search.artifact import load_artifact

    artifacts = {variant: load_artifact(Path(run["files"]["artifact"])) for variant, run in runs.items()}
    latencies = interleaved_latency(artifacts, rounds=rounds, threads=threads)
    reference = latencies[next(iter(runs))]["median_ms"]
    lines = [f"Plans in {rounds} interleaved rounds:", "", "| variant | median (ms) | IQR (ms) | / first |",
             "| --- | ---: | ---: | ---: |"]
    for variant, latency in latencies.items():
        lines.append(f"| {variant} | {latency['median_ms']:.2f} | {latency['spread_ms']:.2f} | "
                     f"{latency['median_ms'] / reference:.3f} |")
    return lines


def main() -> None:
    args = parse_args()
    use_threads(args.threads)  # the comparison's timings, in this process
    print(f"CPU {host().cpu}, vector unit {HOST.name}, {args.threads} threads; "
          f"1-min load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    for model in args.models:
        label = Path(model).stem
        runs = {variant: earlier_run(args.work / label / variant) if args.compare_only or variant in args.earlier
                else run_tune(model, flags, args.work / label / variant, args.threads)
                for variant, flags in args.variants.items()}
        print(f"\n### {label}\n")
        for variant, run in runs.items():
            print(f"- {variant}: `{run['command']}`")
        print("", *phase_table(runs), sep="\n")
        if len(runs) > 1:
            print("", *compare_plans(runs, args.rounds, args.threads), sep="\n")
        print(f"\n1-min load average {os.getloadavg()[0]:.2f} at the end", flush=True)


if __name__ == "__main__":
    main()
