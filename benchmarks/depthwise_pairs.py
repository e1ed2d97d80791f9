"""Depthwise convolutions that convert layouts on the way, against the same problem without them, end to end.

For each network (MobileNetV2's depthwise convolutions): the cost problem is extracted from ``--cache`` (measuring
what it lacks, with ``tessera tune``'s default timing) over ``--layouts`` and ``--space-size``, and solved twice by
the auto solver: ``plan`` with every candidate, ``plan, same layouts`` with each depthwise convolution's converting
candidates (input layout != output layout) forbidden, i.e. the space before depthwise kernels converted. Both, with
the uniform baselines, are exported, checked and timed in interleaved rounds in one process
(``experiments.timing.time_plans``, the harness of ``tessera tune``) and profiled inside the network. Prints each
plan's predicted and measured milliseconds, the profiled time of the depthwise kernels and of the layout transforms,
and which converting pairs the plan chose. With ``--kernels``, instead: MobileNetV2's depthwise shapes timed alone
(``tessera tune``'s default timing, the best of each pair's first four settings) in one layout, converting, and as
the same-layout kernel plus the separate transform it replaces. Run it with nothing else on the machine and record
its CPU and vector unit.

    .venv/bin/python benchmarks/depthwise_pairs.py --models mobilenet_v2 --threads 2 --cache costs.sqlite
    .venv/bin/python benchmarks/depthwise_pairs.py --kernels --threads 2
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.extraction import extract  # noqa: E402
from experiments.timing import plan_table, time_plans, variant_benchmark_args  # noqa: E402
from search.candidates import Candidate  # noqa: E402
from search.host import host  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.plan import baseline_plan  # noqa: E402
from solvers import Problem, solve  # noqa: E402

BASELINES = ("nchw16c", "nhwc")


def converting(candidate: str) -> bool:
    parsed = Candidate.parse(candidate)
    return parsed.in_layout != parsed.out_layout


def profiled_ms(nodes: set[str], profile) -> float:
    """Profiled milliseconds per run of the calls that compute one of ``nodes``."""
    return sum(call.ms for call in profile.calls if any(origin.op in nodes for origin in call.computes))


def same_layouts(problem: Problem, depthwise: set[str]) -> Problem:
    """``problem`` with the converting candidates of the nodes ``depthwise`` forbidden."""
    return problem.forbidding(lambda node, candidate: node in depthwise and converting(candidate))


KERNELS = ((144, 56), (192, 28), (576, 14), (960, 7))  # (channels, size) of MobileNetV2's 3x3 stride-1 layers
PAIRS = (("NCHW8c", "NCHW16c"), ("NCHW16c", "NCHW8c"), ("NCHW32c", "NCHW16c"), ("NHWC", "NCHW16c"),
         ("NCHW16c", "NHWC"))


def time_kernels(threads: int) -> None:
    """Each of ``KERNELS`` per pair of ``PAIRS``: converting, and in the output's layout after a separate transform
    of the input (ms)."""
    from cost_models.cache import DEFAULT_TIMING
    from cost_models.tasks import TransformTask
    from cost_models.timer import time_kernel
    from search.host import make_target
    from search.kinds import kernel_kind
    from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec

    kind, target = kernel_kind("depthwise_conv2d"), make_target(threads)

    def best(workload, in_layout: str, out_layout: str) -> float:
        spec = KernelSpec(workload, in_layout, out_layout, (), Epilogue(True, False, "relu6"))
        return min(time_kernel(kind.build(dataclasses.replace(spec, knobs=knobs), target), target=target,
                               threads=threads, method=DEFAULT_TIMING).median_ms
                   for knobs in kind.knob_space(spec, 4))

    print(f"\n### Depthwise 3x3 kernels alone: {host().cpu}, vector unit {HOST.name}, {threads} threads, "
          f"{DEFAULT_TIMING} timing (ms)\n")
    print("| shape | in > out | converting | same layout (out's) | transform | same + transform |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for channels, size in KERNELS:
        workload = Conv2DWorkload(1, channels, size, size, channels, (3, 3), (1, 1), (1, 1, 1, 1), groups=channels)
        for in_layout, out_layout in PAIRS:
            if (in_layout, out_layout) not in kind.supported_layouts(workload):
                continue
            task = TransformTask((1, channels, size, size), in_layout, out_layout)
            transform = time_kernel(task.primfunc(target), target=target, threads=threads,
                                    method=DEFAULT_TIMING).median_ms
            inside, same = best(workload, in_layout, out_layout), best(workload, out_layout, out_layout)
            print(f"| {channels}x{size}x{size} | {in_layout} > {out_layout} | {inside:.4f} | {same:.4f} | "
                  f"{transform:.4f} | {same + transform:.4f} |")


def main() -> None:
    args = variant_benchmark_args(__doc__.split("\n")[0], model="mobilenet_v2",
                                  layouts=["NHWC", "NCHW8c", "NCHW16c", "NCHW32c"], space_size=6,
                                  kernels="time MobileNetV2's depthwise kernels alone instead")
    if args.kernels:
        time_kernels(args.threads)
        return
    for model in args.models:
        extracted = extract(model, threads=args.threads, cache=args.cache, layouts=args.layouts,
                            space_size=args.space_size, baselines=list(BASELINES), costs="measured")
        graph = extracted.graph
        depthwise = {op.name for op in graph.tunable if op.kind == "depthwise_conv2d"}
        plan = extracted.plan(solve(extracted.problem))
        plans = {"plan": plan, "plan, same layouts": extracted.plan(solve(same_layouts(extracted.problem, depthwise))),
                 **{name: baseline_plan(graph, name, extracted.model, extracted.args) for name in BASELINES}}
        pairs = Counter(plan.choices[node].split(":")[0] for node in depthwise if converting(plan.choices[node]))
        timed = time_plans(extracted, plans, repeat=args.rounds, profile_runs=args.profile_runs)
        print(f"\n### {model}: {host().cpu}, vector unit {HOST.name}, {args.threads} threads; layouts "
              f"{', '.join(args.layouts)}, space {args.space_size}; {extracted.new} of {extracted.tasks} tasks "
              f"measured; load {timed.load[0]:.2f} -> {timed.load[1]:.2f}")
        print(f"{len(depthwise)} depthwise convolutions; the plan converts in {sum(pairs.values())}: "
              f"{', '.join(f'{pair} x{n}' for pair, n in pairs.most_common()) or 'none'}\n")
        print("\n".join(plan_table(timed, "depthwise ms (profile)", partial(profiled_ms, depthwise))))


if __name__ == "__main__":
    main()
