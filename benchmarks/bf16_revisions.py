"""An earlier revision of the bf16 convolution template against the current one, paired on ResNet-50's convolutions.

The baseline is a copy of an earlier ``search/templates/conv2d_dot.py``, loaded as a module beside the current one
(it must build on the current helpers of ``search/templates/dot.py`` and ``bf16.py`` and the current micro-kernels).
Each of ResNet-50's distinct convolutions (as ``benchmarks/bf16_kernels.py`` builds them), and two strided 3x3 ones with
short output rows (Inception-v3's 17x17 -> 8x8 reduction, an SSD extra layer), is built by both in this process and
timed alternately, round by round (``cost_models.timer.time_kernel``: random inputs, warm-up, repeats of at least
50 ms), so that a neighbour's load on a shared host falls on both. Per kernel: the medians of the rounds, the median
and range of the per-round ratios (baseline / current: > 1, the current is faster) and the ratio of the minima.
Run it with nothing else on the machine.

    git show REV:search/templates/conv2d_dot.py > /tmp/conv2d_dot_before.py
    .venv/bin/python benchmarks/bf16_revisions.py --baseline /tmp/conv2d_dot_before.py [--unit amx|dot]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bf16_kernels import resnet50_kernels  # noqa: E402
from cost_models.timer import time_kernel  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import kernel_kind  # noqa: E402
from search.precision import AMX, DOT, INSTRUCTIONS, KNOB  # noqa: E402
from search.templates import Conv2DWorkload, Epilogue, KernelSpec  # noqa: E402
from search.templates import conv2d as conv2d_kernels  # noqa: E402

UNITS = {"amx": AMX, "dot": DOT}
SHORT_ROWS = [("inception.red", Conv2DWorkload(1, 192, 17, 17, 320, (3, 3), (2, 2), (0, 0, 0, 0))),
              ("ssd.extra", Conv2DWorkload(1, 256, 16, 16, 512, (3, 3), (2, 2), (1, 1, 1, 1)))]


def kernels() -> list[tuple[str, str, KernelSpec]]:
    """ResNet-50's distinct convolutions and the two strided ones with short output rows."""
    extra = [(name, f"{wl.in_channels}x{wl.height}x{wl.width} -> {wl.out_channels}, 3x3/2",
              KernelSpec(wl, "NCHW16c", "NCHW16c", (), Epilogue(True, False, "relu"))) for name, wl in SHORT_ROWS]
    return resnet50_kernels() + extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="an earlier conv2d_dot.py")
    parser.add_argument("--unit", choices=sorted(UNITS), default="amx")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", help="comma-separated kernel names")
    args = parser.parse_args()
    unit = UNITS[args.unit]
    if not args.baseline.is_file():
        parser.error(f"no such file: {args.baseline}")
    if INSTRUCTIONS[unit] not in host().features:
        parser.error(f"this CPU ({host().cpu}) has no {INSTRUCTIONS[unit]}")
    if not 1 <= args.threads <= len(os.sched_getaffinity(0)) or args.rounds < 1:
        parser.error("--threads from 1 to the usable cores, --rounds positive")
    spec = importlib.util.spec_from_file_location("conv2d_dot_baseline", args.baseline)
    baseline = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = baseline  # dataclasses look their module up
    spec.loader.exec_module(baseline)
    current, target = conv2d_kernels.conv2d_dot, make_target(args.threads)
    only = set(args.only.split(",")) if args.only else None
    print(f"host: {host().cpu}, vector unit {HOST.name}; bf16 on {INSTRUCTIONS[unit]}; {args.threads} threads, "
          f"{args.rounds} rounds, load {os.getloadavg()[0]:.2f}; baseline {args.baseline.name}; ms\n")
    print("| kernel | workload | baseline | current | baseline / current (range) | minima's ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    sums = [0.0, 0.0]
    for name, shape, kernel in kernels():
        if only and name not in only:
            continue
        built = replace(kernel, knobs=((KNOB, unit),))
        kind = kernel_kind(built.workload.kind)
        new = kind.build(built, target)
        conv2d_kernels.conv2d_dot = baseline  # the kind's template reaches the bf16 one through this attribute
        try:
            old = kind.build(built, target)
        finally:
            conv2d_kernels.conv2d_dot = current
        times: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for label, func in (("old", old), ("new", new)):
                times[label].append(time_kernel(func, target=target, threads=args.threads, repeat=3,
                                                min_repeat_ms=50).median_ms)
        ratios = [o / n for o, n in zip(times["old"], times["new"])]
        medians = statistics.median(times["old"]), statistics.median(times["new"])
        sums = [sums[0] + medians[0], sums[1] + medians[1]]
        print(f"| {name} | {shape} | {medians[0]:.3f} | {medians[1]:.3f} | {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {min(times['old']) / min(times['new']):.2f}x |", flush=True)
    print(f"| sum | | {sums[0]:.3f} | {sums[1]:.3f} | {sums[0] / sums[1]:.2f}x | |")
    print(f"\nload after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
