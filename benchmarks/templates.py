"""Per-layer GFLOP/s of the conv templates on ResNet-50's distinct convolutions (batch 1, 224x224).

For each layer: the best (layouts, knobs) found over a small space (screened with short timings, then timed again
like the rest), the uniform NCHW16c default, and PyTorch's CPU conv2d when torch is importable. Times are medians of
repeats with their interquartile range; one timing at a time.

    .venv/bin/python benchmarks/templates.py            # every layer, the full space
    .venv/bin/python benchmarks/templates.py --quick    # four layers, a few candidates each
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tvm  # noqa: E402

from cost_models.timer import Timing, time_kernel  # noqa: E402
from search.errors import SearchError  # noqa: E402
from search.host import make_target  # noqa: E402
from search.kinds import kernel_kind  # noqa: E402
from search.templates import Conv2DWorkload, Epilogue, KernelSpec  # noqa: E402

NO_EPILOGUE = Epilogue(bias=False)


def resnet50_convs() -> list[tuple[str, Conv2DWorkload]]:
    """(name, workload) of ResNet-50 v1.5's distinct convolutions, in network order."""

    def conv(c: int, hw: int, o: int, k: int, s: int = 1) -> Conv2DWorkload:
        p = k // 2
        return Conv2DWorkload(1, c, hw, hw, o, (k, k), (s, s), (p, p, p, p))

    layers = [("stem", conv(3, 224, 64, 7, 2))]
    layers += [("l1.a", conv(64, 56, 64, 1)), ("l1.b", conv(64, 56, 64, 3)), ("l1.c", conv(64, 56, 256, 1))]
    layers += [("l1.in", conv(256, 56, 64, 1))]
    for stage, (c_in, hw, mid) in enumerate([(256, 56, 128), (512, 28, 256), (1024, 14, 512)], start=2):
        out = 4 * mid
        layers += [
            (f"l{stage}.a0", conv(c_in, hw, mid, 1)),
            (f"l{stage}.b0", conv(mid, hw, mid, 3, 2)),
            (f"l{stage}.down", conv(c_in, hw, out, 1, 2)),
            (f"l{stage}.c", conv(mid, hw // 2, out, 1)),
            (f"l{stage}.in", conv(out, hw // 2, mid, 1)),
            (f"l{stage}.b", conv(mid, hw // 2, mid, 3)),
        ]
    return layers


def default_spec(wl: Conv2DWorkload) -> KernelSpec:
    """The uniform NCHW16c kernel (NCHW input when the channels fit no 16-block)."""
    return KernelSpec(wl, "NCHW16c" if wl.in_channels % 16 == 0 else "NCHW", "NCHW16c", (), NO_EPILOGUE)


def candidates(wl: Conv2DWorkload, quick: bool, knobs: int) -> Iterator[KernelSpec]:
    """Layout pairs x the first ``knobs`` knob settings of each."""
    blocks = (16, 32) if quick else (8, 16, 32, 64)
    pairs = [(f"NCHW{b}c", f"NCHW{b}c") for b in blocks] + [("NHWC", "NHWC")]
    if not quick:
        pairs += [("NCHW16c", "NCHW32c"), ("NCHW32c", "NCHW16c"), ("NCHW", "NCHW")]
    if wl.in_channels % 16:  # the stem: nothing but NCHW / NHWC input fits 3 channels
        pairs = list(dict.fromkeys((i if i in ("NCHW", "NHWC") else "NCHW", o) for i, o in pairs))
    for in_layout, out_layout in pairs:
        spec = KernelSpec(wl, in_layout, out_layout, (), NO_EPILOGUE)
        try:
            space = kernel_kind(spec.workload.kind).knob_space(spec, size=knobs)
        except SearchError:  # a block that does not divide the channels
            continue
        for setting in space:
            yield replace(spec, knobs=setting)


def best_spec(wl: Conv2DWorkload, target: tvm.target.Target, args: argparse.Namespace) -> KernelSpec:
    """The candidate with the lowest median over a short screening timing."""
    screened = [
        (time_kernel(kernel_kind(spec.workload.kind).build(spec, target), target=target, threads=args.threads,
                     repeat=3, min_repeat_ms=20), spec)
        for spec in candidates(wl, args.quick, args.knobs)
    ]
    return min(screened, key=lambda pair: pair[0].median_ms)[1]


def careful_timing(spec: KernelSpec, target: tvm.target.Target, args: argparse.Namespace) -> Timing:
    kernel = kernel_kind(spec.workload.kind).build(spec, target)
    return time_kernel(kernel, target=target, threads=args.threads, repeat=args.repeat, min_repeat_ms=100)


def torch_timing(wl: Conv2DWorkload, threads: int, repeat: int) -> Timing:
    """PyTorch conv2d (NCHW, no bias) timed like ``time_kernel``: repeats of >= 100 ms, after a warm-up.

    Run these before TVM's first kernel: TVM pins its pool's threads to cores (with a one-thread pool, the main
    thread too, whose affinity PyTorch's threads would inherit).
    """
    import torch

    torch.set_num_threads(threads)
    x = torch.rand(wl.in_shape) * 2 - 1
    w = torch.rand(wl.out_channels, wl.in_channels, *wl.kernel) * 2 - 1
    top, left, _, _ = wl.padding

    def call():
        return torch.nn.functional.conv2d(x, w, stride=wl.strides, padding=(top, left))

    with torch.no_grad():
        call()
        start, number = time.perf_counter(), 0
        while time.perf_counter() - start < 0.1:
            call()
            number += 1
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                call()
            samples.append((time.perf_counter() - start) * 1e3 / number)
    return Timing.from_samples(samples, threads)


def show(timing: Timing, flops: int) -> str:
    return f"{timing.gflops(flops):6.1f} ±{100 * timing.iqr_ms / timing.median_ms:3.0f}%"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="four layers, three layout pairs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5, help="repeats (of >= 100 ms) of the final timings")
    parser.add_argument("--knobs", type=int, help="knob settings per layout pair (default 6, --quick 2)")
    args = parser.parse_args(argv)
    args.knobs = args.knobs or (2 if args.quick else 6)
    start = time.perf_counter()
    target = make_target(args.threads)
    layers = resnet50_convs()
    if args.quick:
        layers = [layers[i] for i in (0, 2, 8, 21)]
    has_torch = importlib.util.find_spec("torch") is not None
    print(f"GFLOP/s at the median time ± interquartile range of the times; {args.threads} threads, {target.mcpu}")
    torch_times = [torch_timing(wl, args.threads, args.repeat) if has_torch else None for _, wl in layers]
    header = f"{'layer':<8} {'workload':<24} {'best':>14}  {'layouts / knobs':<52} {'NCHW16c':>14}"
    print(header + (f" {'torch':>14}" if has_torch else ""))
    ratios = []
    for (name, wl), torch_time in zip(layers, torch_times):
        spec = best_spec(wl, target, args)
        timing, default = careful_timing(spec, target, args), careful_timing(default_spec(wl), target, args)
        ratios.append(default.median_ms / timing.median_ms)
        shape = f"{wl.in_channels}x{wl.height}->{wl.out_channels} k{wl.kernel[0]}s{wl.strides[0]}"
        where = f"{spec.in_layout}->{spec.out_layout} " + ",".join(f"{k}={v}" for k, v in spec.knobs)
        row = f"{name:<8} {shape:<24} {show(timing, wl.flops):>14}  {where:<52} {show(default, wl.flops):>14}"
        print(row + (f" {show(torch_time, wl.flops):>14}" if has_torch else ""), flush=True)
    print(f"best / NCHW16c default speed-up: geometric mean {statistics.geometric_mean(ratios):.2f}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
