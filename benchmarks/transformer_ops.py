"""GFLOP/s of tessera's dense and batch_matmul kernels on a transformer's distinct layers, beside numpy's BLAS.

The model's candidate space is measured (``experiments.extraction.extract``, warm timings as throughput is quoted, the
given cost cache); for each distinct workload the best candidate's median is reported with the number of nodes
running it, and the same product computed by numpy (``a @ w`` in float32, BLAS limited to the same threads with
threadpoolctl): random inputs, a warm-up, repeats of at least 50 ms, median and interquartile range, one timing at a
time. Both are also given as fractions of the host's FMA peak at the same threads (``benchmarks/fma_peak.py``,
measured first). Prints markdown. Measuring fills the cache: run with nothing else on the machine and record its CPU
and vector unit.

    .venv/bin/python benchmarks/transformer_ops.py --model bert_base --threads 2 --cache costs.sqlite
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fma_peak import measure_peak  # noqa: E402  (this script's directory)

from cost_models.sources import MeasuredSource  # noqa: E402
from experiments.extraction import extract  # noqa: E402
from search.host import host  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import get_kind  # noqa: E402
from search.threads import use_threads  # noqa: E402

KINDS = ("dense", "batch_matmul")
MIN_REPEAT_S = 0.05


def numpy_operands(workload, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The float32 operands numpy multiplies for ``workload``: (rows, k) x (k, n), or batched (b, m, k) x (b, k, n)."""
    if workload.kind == "dense":
        shapes = (workload.batch, workload.in_features), (workload.in_features, workload.out_features)
    else:
        shapes = (workload.batch, workload.m, workload.k), (workload.batch, workload.k, workload.n)
    return tuple(rng.uniform(-1, 1, shape).astype(np.float32) for shape in shapes)


def time_numpy(a: np.ndarray, w: np.ndarray, repeat: int) -> tuple[float, float]:
    """Median and interquartile range (ms) of ``a @ w``."""
    np.matmul(a, w)
    start, number = time.perf_counter(), 0
    while time.perf_counter() - start < MIN_REPEAT_S:
        np.matmul(a, w)
        number += 1
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            np.matmul(a, w)
        samples.append((time.perf_counter() - start) / number * 1e3)
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return statistics.median(samples), q3 - q1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_base")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10, help="numpy's timed repeats")
    parser.add_argument("--cache", default=str(Path("~/.cache/tessera/costs.sqlite").expanduser()))
    args = parser.parse_args()
    use_threads(args.threads)
    peak = measure_peak(args.threads).gflops
    extracted = extract(args.model, threads=args.threads, cache=args.cache, costs=MeasuredSource(timing="warm"))
    graph, problem = extracted.graph, extracted.problem
    nodes: dict[object, list[int]] = defaultdict(list)
    for op in graph.tunable:
        if op.kind in KINDS:
            nodes[get_kind(op.kind).workload(op)].append(problem.index(op.name))
    print(f"{args.model}, {args.threads} threads, CPU {host().cpu}, vector unit {HOST.name}; "
          f"measurements: {extracted.tasks} tasks, {extracted.new} new; FMA peak {peak:.1f} GFLOP/s\n")
    print("| workload | nodes | tessera ms | GFLOP/s | of peak | best candidate | numpy ms (IQR) | GFLOP/s | of peak | "
          "tessera / numpy |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    rng = np.random.default_rng(0)
    totals = [0.0, 0.0]
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for workload, indices in nodes.items():
            node = problem.nodes[indices[0]]
            best = int(np.argmin(node.costs))
            ms = float(node.costs[best])
            blas_ms, blas_iqr = time_numpy(*numpy_operands(workload, rng), args.repeat)
            totals[0] += ms * len(indices)
            totals[1] += blas_ms * len(indices)
            ours, blas = workload.flops / ms / 1e6, workload.flops / blas_ms / 1e6
            print(f"| {workload} | {len(indices)} | {ms:.3f} | {ours:.1f} | {ours / peak:.0%} | "
                  f"{node.candidates[best]} | {blas_ms:.3f} ({blas_iqr:.3f}) | {blas:.1f} | {blas / peak:.0%} | "
                  f"{ms / blas_ms:.2f} |")
    print(f"\nsum over the network's nodes: tessera {totals[0]:.1f} ms, numpy {totals[1]:.1f} ms "
          f"({totals[0] / totals[1]:.2f}x numpy's time)")


if __name__ == "__main__":
    main()
