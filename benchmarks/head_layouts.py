"""Where attention's heads split and merge: the solver's plan against the same plan with every ``batch_matmul``
head-major (``BIJ``: export transposes queries, keys and values into the kernel's order and the context back), each
batch_matmul node there running its best head-major candidate.

The model's space is priced from the cost cache (``experiments.extraction.extract``: what the cache lacks is measured
with the default timing) and solved exactly; both plans are exported and checked, timed end to end in interleaved rounds
and profiled inside the network (``search.profile``), and the time of their batch_matmul kernels and head transforms
compared with what the problem predicts for them. Prints markdown with the host's CPU and vector unit. Measuring fills
the cache and timing wants a quiet machine: run nothing else meanwhile.

    .venv/bin/python benchmarks/head_layouts.py --model bert_base --threads 2 --cache costs.sqlite
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's packages before this directory's

from cost_models.pricing import plan_cost  # noqa: E402
from experiments.extraction import extract  # noqa: E402
from experiments.timing import interleaved_latency  # noqa: E402
from search.artifact import load_artifact  # noqa: E402
from search.candidates import Candidate  # noqa: E402
from search.export import export, reference_outputs, save_artifact  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.plan import Plan, plan_from_assignment  # noqa: E402
from search.profile import profile_artifact  # noqa: E402
from search.threads import use_threads  # noqa: E402
from solvers import solve  # noqa: E402

KIND = "batch_matmul"


def head_major(problem, plan: Plan, graph) -> Plan:
    """``plan`` with every batch_matmul node on its cheapest ``BIJ>BIJ`` candidate (by the problem's node cost)."""
    choices = dict(plan.choices)
    for op in graph.tunable:
        if op.kind != KIND:
            continue
        node = problem.nodes[problem.index(op.name)]
        options = [(cost, name) for name, cost in zip(node.candidates, node.costs)
                   if Candidate.parse(name).in_layout == Candidate.parse(name).out_layout == "BIJ"]
        choices[op.name] = min(options)[1]
    return Plan(choices, plan.model, plan.args, plan.vector_unit)


def attention_ms(profile) -> tuple[float, float]:
    """The profile's batch_matmul kernels and head transforms (layout transforms), ms per run."""
    kernels = transforms = 0.0
    for call in profile.calls:
        if any(origin.is_transform for origin in call.computes):
            transforms += call.ms
        elif any(origin.op.startswith(KIND) for origin in call.computes):
            kernels += call.ms
    return kernels, transforms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_base")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--profile-runs", type=int, default=20)
    args = parser.parse_args()
    threads = use_threads(args.threads)
    extracted = extract(args.model, threads=threads, cache=args.cache, costs="measured")
    problem, graph = extracted.problem, extracted.graph
    solution = solve(problem, "auto")
    plans = {"solver's plan": plan_from_assignment(solution.assignment, args.model, extracted.args,
                                                   auxiliary=problem.meta["auxiliary"])}
    plans["head-major"] = head_major(problem, plans["solver's plan"], graph)
    target = make_target(threads)
    reference = reference_outputs(graph, target, 0)
    artifacts, profiles = {}, {}
    with tempfile.TemporaryDirectory() as work:
        for index, (label, plan) in enumerate(plans.items()):
            compiled = export(graph, plan, target=target, threads=threads, reference=reference)
            artifacts[label] = load_artifact(save_artifact(compiled, Path(work) / str(index)))
        latency = interleaved_latency(artifacts, rounds=args.rounds, threads=threads)
        for label, artifact in artifacts.items():
            profiles[label] = profile_artifact(artifact, runs=args.profile_runs)
    print(f"{args.model}, {threads} threads; host {host().cpu}, vector unit {HOST.name}; "
          f"{extracted.new} of {extracted.tasks} tasks measured now\n")
    print("| plan | batch_matmul layouts | predicted ms | measured median ms (IQR) | in network: batch_matmul ms "
          "| head transforms ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for label, plan in plans.items():
        layouts = sorted({f"{c.in_layout}>{c.out_layout}" for node, name in plan.choices.items()
                          if node.startswith(KIND) for c in [Candidate.parse(name)]})
        kernels, transforms = attention_ms(profiles[label])
        t = latency[label]
        print(f"| {label} | {', '.join(layouts)} | {plan_cost(problem, plan.choices):.2f} | {t['median_ms']:.2f} "
              f"({t['spread_ms']:.2f}) | {kernels:.2f} | {transforms:.2f} |")


if __name__ == "__main__":
    main()
