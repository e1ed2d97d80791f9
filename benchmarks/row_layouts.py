"""Blocked rows between linear layers: the solver's plan in a space with the row layouts ``CN{c}c`` against its plan
on the same problem with every linear layer's blocked candidates forbidden (every linear layer ``NC``).

The space holds every candidate of every node (``--space-size`` large enough), so the NC kernels compete with all their
knob settings in both. It is priced from the cost cache (``experiments.extraction.extract``: what the cache lacks is
measured with the default timing) and solved exactly twice; per distinct linear layer the best kernel reading and
writing each row layout is printed (isolated records), then both plans are exported and checked, timed end to end in
interleaved rounds and profiled inside the network (``experiments.timing.time_plans``: two identical plans are timed
once). Prints markdown with the host's CPU and vector unit. Measuring fills the cache and timing wants a quiet machine:
run nothing else meanwhile.

    .venv/bin/python benchmarks/row_layouts.py --models bert_base --threads 2 --cache costs.sqlite --rounds 10
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's packages before this directory's

from experiments.extraction import extract  # noqa: E402
from experiments.timing import time_plans, variant_benchmark_args  # noqa: E402
from search.candidates import Candidate  # noqa: E402
from search.host import host  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import kernel_kind  # noqa: E402
from search.space import DEFAULT_LAYOUTS  # noqa: E402
from solvers import solve  # noqa: E402


def blocked(candidate: str) -> bool:
    """Whether a dense candidate reads or writes blocked rows."""
    parsed = Candidate.parse(candidate)
    return (parsed.in_layout, parsed.out_layout) != ("NC", "NC")


def best_by_layouts(extracted) -> dict[str, dict[tuple[str, str], float]]:
    """Per distinct dense workload and epilogue: the cheapest kernel record of each (input, output) row layout."""
    best: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    meta = extracted.problem.meta["candidates"]
    for op in extracted.graph.tunable:
        if op.kind != "dense":
            continue
        kind = kernel_kind("dense")
        wl, epilogue = kind.workload(op), kind.epilogue(op)
        extras = [name for name, on in (("bias", epilogue.bias), ("residual", epilogue.residual)) if on]
        extras += [epilogue.activation] if epilogue.activation else []
        label = f"{wl.batch} x {wl.in_features} -> {wl.out_features} ({', '.join(extras)})"
        for entry in meta[op.name].values():
            if entry.get("kernel_ms") is not None:
                pair = (entry["in_layout"], entry["out_layout"])
                best[label][pair] = min(best[label].get(pair, float("inf")), entry["kernel_ms"])
    return best


def in_network(profile) -> tuple[float, float]:
    """The profile's dense kernels and row transforms, ms per run."""
    kernels = transforms = 0.0
    for call in profile.calls:
        if any(origin.is_transform and len(origin.shape) == 2 for origin in call.computes):
            transforms += call.ms
        elif any(origin.op.startswith("dense") for origin in call.computes):
            kernels += call.ms
    return kernels, transforms


def main() -> None:
    args = variant_benchmark_args(__doc__.splitlines()[0], model="bert_base", layouts=[*DEFAULT_LAYOUTS, "CN16c"],
                                  space_size=1000)
    for model in args.models:
        extracted = extract(model, threads=args.threads, cache=args.cache, layouts=args.layouts,
                            space_size=args.space_size, costs="measured")
        graph = extracted.graph
        dense = {op.name for op in graph.tunable if op.kind == "dense"}
        row_major = extracted.problem.forbidding(
            lambda node, candidate, dense=dense: node in dense and blocked(candidate))
        plans = {"rows blocked where the solver chooses": extracted.plan(solve(extracted.problem, "auto")),
                 "every linear layer NC": extracted.plan(solve(row_major, "auto"))}
        timed = time_plans(extracted, plans, repeat=args.rounds, profile_runs=args.profile_runs)
        results, load, profiles = timed.timings, timed.load, timed.profiles
        print(f"\n### {model}: {args.threads} threads; host {host().cpu}, vector unit {HOST.name}; layouts "
              f"{', '.join(args.layouts)}, space {args.space_size}; {extracted.new} of {extracted.tasks} tasks "
              f"measured now; load {load[0]:.2f} -> {load[1]:.2f}\n")
        best = best_by_layouts(extracted)
        pairs = sorted({pair for by_pair in best.values() for pair in by_pair})
        print("| linear layer | " + " | ".join(f"{i}>{o} ms" for i, o in pairs) + " |")
        print("| --- |" + " ---: |" * len(pairs))
        for label, by_pair in best.items():
            print(f"| {label} | " + " | ".join(f"{by_pair[p]:.3f}" if p in by_pair else "" for p in pairs) + " |")
        print("\n| plan | linear layers reading / writing blocked rows | predicted ms | measured median ms (IQR) "
              "| in network: dense ms | row transforms ms |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for label, plan in plans.items():
            chosen = [Candidate.parse(plan.choices[node]) for node in dense]
            reading, writing = sum(c.in_layout != "NC" for c in chosen), sum(c.out_layout != "NC" for c in chosen)
            t, predicted = results[label].latency, results[label].predicted_ms
            measured = "(as above) | | "  # an identical plan is timed once
            if label in profiles:
                kernels, transforms = in_network(profiles[label])
                measured = f"{t['median_ms']:.2f} ({t['spread_ms']:.2f}) | {kernels:.2f} | {transforms:.2f}"
            print(f"| {label} | {reading} / {writing} of {len(chosen)} | {predicted:.2f} | {measured} |")


if __name__ == "__main__":
    main()
