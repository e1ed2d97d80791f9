"""Blocked rows between linear layers: the solver's plan in a space with the row layouts ``CN{c}c`` against its plan
in the same space without them (every linear layer ``NC``).

Both spaces hold every candidate of every node (``--space-size`` large enough), so the narrow space is the wide one
minus the blocked candidates: the NC kernels compete with all their knob settings in both. Each space is priced from
the cost cache (``experiments.tune.extract``: what the cache lacks is measured with the default timing) and solved
exactly; per distinct linear layer the best kernel reading and writing each row layout is printed (isolated records),
then both plans are exported and checked, timed end to end in interleaved rounds and profiled inside the network
(``search.profile``). Prints markdown with the host's CPU and vector unit. Measuring fills the cache and timing wants
a quiet machine: run nothing else meanwhile.

    .venv/bin/python benchmarks/row_layouts.py --model bert_base --threads 2 --cache costs.sqlite
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's packages before this directory's

from cost_models.measure import cpu_model  # noqa: E402
from cost_models.pricing import plan_cost  # noqa: E402
from experiments.timing import interleaved_latency  # noqa: E402
from experiments.tune import extract, use_threads  # noqa: E402
from search.artifact import load_artifact, save_artifact  # noqa: E402
from search.candidates import Candidate  # noqa: E402
from search.export import export, make_target, reference_outputs  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import kernel_kind  # noqa: E402
from search.plan import plan_from_assignment  # noqa: E402
from search.profile import profile_artifact  # noqa: E402
from search.space import DEFAULT_LAYOUTS  # noqa: E402
from solvers import solve  # noqa: E402


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_base")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--blocks", type=int, nargs="+", default=[16], help="row blocks searched (CN{c}c)")
    parser.add_argument("--space-size", type=int, default=1000, help="candidates per node (default: all)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--profile-runs", type=int, default=20)
    args = parser.parse_args()
    threads = use_threads(args.threads)
    rows = [f"CN{block}c" for block in args.blocks]
    spaces = {"rows blocked where the solver chooses": (*DEFAULT_LAYOUTS, *rows), "every linear layer NC":
              DEFAULT_LAYOUTS}
    extracted = {label: extract(args.model, threads=threads, cache=args.cache, layouts=layouts,
                                space_size=args.space_size) for label, layouts in spaces.items()}
    wide = next(iter(extracted.values()))
    plans = {}
    for label, ex in extracted.items():
        solution = solve(ex.problem, "auto")
        plans[label] = plan_from_assignment(solution.assignment, args.model, ex.args,
                                            auxiliary=ex.problem.meta["auxiliary"])
    graph, target = wide.graph, make_target(threads)
    reference = reference_outputs(graph, target, 0)
    artifacts, profiles = {}, {}
    with tempfile.TemporaryDirectory() as work:
        for index, (label, plan) in enumerate(plans.items()):
            compiled = export(graph, plan, target=target, threads=threads, reference=reference)
            artifacts[label] = load_artifact(save_artifact(compiled, Path(work) / str(index)))
        latency = interleaved_latency(artifacts, rounds=args.rounds, threads=threads)
        for label, artifact in artifacts.items():
            profiles[label] = profile_artifact(artifact, runs=args.profile_runs)
    print(f"{args.model}, {threads} threads; host {cpu_model()}, vector unit {HOST.name}; row layouts "
          f"{', '.join(rows)}; {wide.new} of {wide.tasks} tasks measured now\n")
    pairs = sorted({pair for by_pair in best_by_layouts(wide).values() for pair in by_pair})
    print("| linear layer | " + " | ".join(f"{i}>{o} ms" for i, o in pairs) + " |")
    print("| --- |" + " ---: |" * len(pairs))
    for label, by_pair in best_by_layouts(wide).items():
        print(f"| {label} | " + " | ".join(f"{by_pair[p]:.3f}" if p in by_pair else "" for p in pairs) + " |")
    print("\n| plan | linear layers reading / writing blocked rows | predicted ms | measured median ms (IQR) "
          "| in network: dense ms | row transforms ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, plan in plans.items():
        chosen = [Candidate.parse(name) for node, name in plan.choices.items() if graph.op(node).kind == "dense"]
        reading, writing = sum(c.in_layout != "NC" for c in chosen), sum(c.out_layout != "NC" for c in chosen)
        kernels, transforms = in_network(profiles[label])
        t = latency[label]
        print(f"| {label} | {reading} / {writing} of {len(chosen)} | "
              f"{plan_cost(extracted[label].problem, plan.choices):.2f} | {t['median_ms']:.2f} ({t['spread_ms']:.2f}) "
              f"| {kernels:.2f} | {transforms:.2f} |")


if __name__ == "__main__":
    main()
