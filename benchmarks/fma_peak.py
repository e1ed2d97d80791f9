"""The host's float32 FMA peak at a thread count: the ceiling a kernel's GFLOP/s is a fraction of.

One TIR kernel, compiled for the host like tessera's templates: each of ``threads`` parallel workers holds as many
vector accumulators as the templates' register tiles use (``search.isa``: 28 of 16 lanes with AVX-512, 14 of 8 with
AVX2) and updates each ``--iters`` times with a fused multiply-add, the chains independent so that the FMA units'
throughput, not their latency, bounds it. Timed like a kernel (``cost_models.timer.time_kernel``: random inputs,
warm-up, repeats of at least 100 ms, median and interquartile range), one thread count at a time. Run it with nothing
else on the machine; ``benchmarks/transformer_ops.py`` reports its kernels as fractions of the same figure.

    .venv/bin/python benchmarks/fma_peak.py --threads 1 2
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tvm  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from cost_models.timer import time_kernel  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST, VectorUnit  # noqa: E402

ITERS = 200_000


@dataclass(frozen=True)
class Peak:
    """The measured FMA throughput at ``threads`` threads."""

    threads: int
    gflops: float  # at the median time per call
    ms: float  # median time per call
    iqr_ms: float


def fma_chains(workers: int, unit: VectorUnit, iters: int) -> tvm.tirx.PrimFunc:
    """``workers`` parallel loops, each updating ``unit.accumulators`` vectors of ``unit.lanes`` float32 ``iters``
    times with ``acc = acc * scale + shift`` (one FMA per lane), then storing them."""
    acc_count, lanes = unit.accumulators, unit.lanes

    @T.prim_func
    def main(scale: T.Buffer((lanes,), "float32"), shift: T.Buffer((lanes,), "float32"),
             init: T.Buffer((workers, acc_count, lanes), "float32"),
             out: T.Buffer((workers, acc_count, lanes), "float32")):
        T.func_attr({"tirx.noalias": True})
        for w in T.parallel(workers):
            acc = T.alloc_buffer((acc_count, lanes), "float32", scope="local")
            for a in T.unroll(acc_count):
                for lane in T.vectorized(lanes):
                    acc[a, lane] = init[w, a, lane]
            for _ in range(iters):
                for a in T.unroll(acc_count):
                    for lane in T.vectorized(lanes):
                        acc[a, lane] = acc[a, lane] * scale[lane] + shift[lane]
            for a in T.unroll(acc_count):
                for lane in T.vectorized(lanes):
                    out[w, a, lane] = acc[a, lane]

    return main


def fma_flops(workers: int, unit: VectorUnit, iters: int) -> float:
    """Floating-point operations of one call of ``fma_chains`` (an FMA counts two)."""
    return 2.0 * workers * unit.accumulators * unit.lanes * iters


def measure_peak(threads: int, unit: VectorUnit = HOST, iters: int = ITERS, repeat: int = 10) -> Peak:
    """The FMA peak at ``threads`` threads: one worker per thread."""
    timing = time_kernel(fma_chains(threads, unit, iters), target=make_target(threads), threads=threads,
                         repeat=repeat, min_repeat_ms=100)
    return Peak(threads, timing.gflops(fma_flops(threads, unit, iters)), timing.median_ms, timing.iqr_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--iters", type=int, default=ITERS, help="FMAs per accumulator lane and call")
    args = parser.parse_args(argv)
    print(f"CPU {host().cpu}, vector unit {HOST.name} ({HOST.lanes} float32 lanes, {HOST.accumulators} "
          f"accumulators per worker), LLVM mcpu {host().mcpu}\n")
    print("| threads | GFLOP/s | GFLOP/s per thread | ms per call (IQR) |")
    print("| ---: | ---: | ---: | ---: |")
    for threads in args.threads:
        peak = measure_peak(threads, iters=args.iters)
        print(f"| {threads} | {peak.gflops:.1f} | {peak.gflops / threads:.1f} | {peak.ms:.3f} ({peak.iqr_ms:.3f}) |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
