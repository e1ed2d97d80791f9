"""Winograd against the direct convolution on ResNet-50's 3x3 stride-1 convolutions: time and numerical error.

For each distinct layer (batch 1, 224x224; bias and ReLU fused, as in the network), in NCHW16c -> NCHW16c: the direct
template's first two knob settings and the Winograd settings F(4x4, 3x3) and F(2x2, 3x3), then, on a host with bf16
instructions, the bf16 direct and F(2x2) settings (``search.templates.winograd_dot``), each timed like a kernel
(``cost_models.timer.time_kernel``: random inputs, warm-up, repeats of at least 100 ms, median and interquartile
range), one at a time, each in a process of its own (``benchmarks.fresh``), and each run once on random data against
the float64 numpy reference (``search.kinds.checks.kernel_error``: ``max|out - ref| / max(1, max|ref|)``). Run it with
nothing else on the machine.

    .venv/bin/python benchmarks/winograd.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fresh import time_fresh  # noqa: E402
from benchmarks.templates import resnet50_convs  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import get_kind  # noqa: E402
from search.kinds.checks import kernel_error  # noqa: E402
from search.precision import precision_of  # noqa: E402
from search.templates import Epilogue, KernelSpec  # noqa: E402
from search.templates.winograd import applies, is_winograd  # noqa: E402

LAYOUT = "NCHW16c"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    if not 1 <= args.threads <= len(os.sched_getaffinity(0)) or args.repeat < 1:
        parser.error("--threads from 1 to the usable cores, --repeat positive")
    target, kind = make_target(args.threads), get_kind("conv2d")
    print(f"host: {host().cpu}, vector unit {HOST.name}, {args.threads} threads, load {os.getloadavg()[0]:.2f}; "
          f"{LAYOUT} -> {LAYOUT}, bias + ReLU fused; ms: median (IQR)\n")
    print("| layer | workload | setting | ms | vs direct default | relative error |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for name, workload in resnet50_convs():
        if not applies(workload):
            continue
        spec = KernelSpec(workload, LAYOUT, LAYOUT, (), Epilogue(True, False, "relu"))
        space = kind.knob_space(spec)
        fp32 = [k for k in space if precision_of(k) == "fp32"]
        settings = [k for k in fp32 if not is_winograd(k)][:2] + [k for k in fp32 if is_winograd(k)] + [
            k for k in space if precision_of(k) == "bf16"]
        shape = f"{workload.in_channels}x{workload.height}x{workload.width} -> {workload.out_channels}"
        direct = None
        for knobs in settings:
            built = replace(spec, knobs=knobs)
            timing = time_fresh(built, args.threads, args.repeat)
            direct = direct or timing.median_ms
            label = ",".join(f"{key}={value}" for key, value in knobs)
            print(f"| {name} | {shape} | {label} | {timing.median_ms:.3f} ({timing.iqr_ms:.3f}) | "
                  f"{direct / timing.median_ms:.2f}x | {kernel_error(built, target=target):.1e} |", flush=True)


if __name__ == "__main__":
    main()
