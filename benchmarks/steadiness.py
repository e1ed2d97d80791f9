"""How steady is a measured latency from one minute to the next, and does timing longer make it steadier?

A prediction can only be judged against a measurement as steady as the goal: two measurements of the same module a
few minutes apart must agree to well within 5%. The artifacts given are timed with the harness of ``tessera tune``
(``experiments.timing.interleaved_latency``: interleaved rounds, ~50 ms per sample) ``--repeats`` times, each
repetition once per ``--rounds`` count (counts alternating, a ``--pause`` between repetitions so that they fall into
different minutes). Printed per rounds count and artifact: the median of the repetitions' medians, their range
(largest over smallest, less 1) and relative standard deviation, and the same for each artifact's median over the
geometric mean of all artifacts' in the same measurement (is the plans' relative speed steadier than their absolute
speed?); with the host's CPU, vector unit and the load averages.

    .venv/bin/python benchmarks/steadiness.py WORK/resnet50/tessera WORK/resnet50/nchw16c --rounds 10 40 --repeats 6

Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _label(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _spread(values: list[float]) -> tuple[float, float, float]:
    """Median, range (max / min - 1) and relative standard deviation of ``values``."""
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.median(values), max(values) / min(values) - 1.0, deviation / statistics.mean(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", type=Path, nargs="+", help="exported artifact directories")
    parser.add_argument("--rounds", type=int, nargs="+", default=[10, 40], help="rounds counts compared")
    parser.add_argument("--repeats", type=int, default=6, help="measurements per rounds count")
    parser.add_argument("--pause", type=float, default=20.0, help="seconds between repetitions")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.artifacts if not (p / "manifest.json").is_file()]
    if missing:
        print(f"error: not artifact directories: {', '.join(missing)}", file=sys.stderr)
        return 2
    if min(args.rounds + [args.repeats, args.threads]) < 1 or args.pause < 0:
        print("error: --rounds, --repeats and --threads must be >= 1, --pause >= 0", file=sys.stderr)
        return 2
    from search.threads import use_threads

    use_threads(args.threads)

    from experiments.timing import interleaved_latency
    from search.artifact import load_artifact
    from search.host import host
    from search.isa import HOST

    print(f"host: {host().cpu}, vector unit {HOST.name}, {args.threads} threads")
    artifacts = {_label(path): load_artifact(path) for path in args.artifacts}
    medians = {rounds: {label: [] for label in artifacts} for rounds in args.rounds}
    relative = {rounds: {label: [] for label in artifacts} for rounds in args.rounds}
    loads, started = [os.getloadavg()[0]], time.monotonic()
    for repeat in range(args.repeats):
        if repeat:
            time.sleep(args.pause)
        order = args.rounds if repeat % 2 == 0 else args.rounds[::-1]
        for rounds in order:
            begun = time.monotonic()
            result = interleaved_latency(artifacts, rounds=rounds, threads=args.threads)
            values = {label: result[label]["median_ms"] for label in artifacts}
            mean = statistics.geometric_mean(values.values())
            for label, value in values.items():
                medians[rounds][label].append(value)
                relative[rounds][label].append(value / mean)
            print(f"repeat {repeat + 1}/{args.repeats}, {rounds} rounds ({time.monotonic() - begun:.1f} s, at "
                  f"{time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.2f}): "
                  + "; ".join(f"{label} {value:.2f}" for label, value in values.items()), flush=True)
    loads.append(os.getloadavg()[0])
    print(f"\n1-minute load average before / after: {loads[0]:.2f} / {loads[1]:.2f}; {args.repeats} repetitions over "
          f"{(time.monotonic() - started) / 60:.1f} min")
    print("\n| rounds | artifact | median of medians ms | range | rel. std | relative speed: range | rel. std |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for rounds in args.rounds:
        for label in artifacts:
            median, span, deviation = _spread(medians[rounds][label])
            _, relative_span, relative_deviation = _spread(relative[rounds][label])
            print(f"| {rounds} | {label} | {median:.2f} | {span:.1%} | {deviation:.1%} | {relative_span:.1%} | "
                  f"{relative_deviation:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
