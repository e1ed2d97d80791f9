"""Export time of concats in place: the writers rebound in the IR against the TVMScript round trip.

For each network and layout, the uniform plan with every concat that can run in place doing so
(``benchmarks/in_place.py``'s ``with_concats``) is exported in turns, in one process: as ``export`` does (a
contiguous slice rebound in the IR, ``search.in_place``) and with every writer rebound through TVMScript (the path a
strided slice takes). Prints per variant the median export seconds over ``--rounds``, the seconds of it spent in
``write_into`` and the kernels rebound. The stock reference of the numerical check is computed once, before. Run it
with nothing else on the machine; it prints the CPU and vector unit.

    .venv/bin/python benchmarks/write_into.py --models densenet201 --layouts nchw16c nhwc
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import search.emit  # noqa: E402
from benchmarks.in_place import with_concats  # noqa: E402
from search import in_place  # noqa: E402
from search.export import export, reference_outputs  # noqa: E402
from search.graph import extract_graph  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.plan import baseline_plan  # noqa: E402
from search.zoo import load_model  # noqa: E402


def through_script(func, full_shape, axis, offset):
    """``write_into`` with every slice rebound through TVMScript."""
    shape = tuple(int(extent) for extent in func.params[-1].ty.shape)
    return in_place._strided_view(func, shape, tuple(int(e) for e in full_shape), axis, offset)


VARIANTS: dict[str, Callable] = {"in the IR": in_place.write_into, "through TVMScript": through_script}


def timed_export(graph, plan, variant: Callable, **kwargs) -> tuple[float, float, int]:
    """Seconds ``export`` took with ``variant`` as the emitter's ``write_into``, seconds in it and its calls."""
    spent: list[float] = []

    def counted(*args):
        start = time.perf_counter()
        result = variant(*args)
        spent.append(time.perf_counter() - start)
        return result

    search.emit.write_into = counted
    try:
        start = time.perf_counter()
        compiled = export(graph, plan, **kwargs)
        total = time.perf_counter() - start
    finally:
        search.emit.write_into = in_place.write_into
    if not compiled.manifest["numerical_check"]["passed"]:
        raise SystemExit("error: an export failed its numerical check")
    return total, sum(spent), len(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["densenet201"])
    parser.add_argument("--layouts", nargs="+", default=["nchw16c", "nhwc"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if min(args.rounds, args.threads) < 1:
        parser.error("--rounds and --threads must be positive")
    target = make_target(args.threads)
    print(f"{host().cpu}, vector unit {HOST.name}, {args.threads} threads; "
          f"median of {args.rounds} exports per variant, in turns\n")
    print("| network | layout | variant | export s | in write_into s | kernels rebound |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for model in args.models:
        graph = extract_graph(load_model(model))
        reference = reference_outputs(graph, target, 0)
        for layout in args.layouts:
            plan = with_concats(baseline_plan(graph, layout), graph, True)
            runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in VARIANTS}
            for index in range(args.rounds):
                order = list(VARIANTS) if index % 2 == 0 else list(reversed(VARIANTS))
                for name in order:
                    runs[name].append(timed_export(graph, plan, VARIANTS[name], target=target,
                                                   threads=args.threads, reference=reference))
            for name, timings in runs.items():
                total = statistics.median(t for t, _, _ in timings)
                inside = statistics.median(s for _, s, _ in timings)
                print(f"| {model} | {layout} | {name} | {total:.1f} | {inside:.1f} | {timings[0][2]} |", flush=True)


if __name__ == "__main__":
    main()
