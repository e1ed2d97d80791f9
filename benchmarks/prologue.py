"""Pre-activations applied in the convolutions that read them, by placement, end to end.

For each network (DenseNet's BatchNorm-ReLU before every 1x1 convolution): the cost problem is extracted from
``--cache`` (measuring what it lacks, with ``tessera tune``'s default timing) over the ``--layouts`` given, the auto
solver's plan taken, and each plan below exported, checked and timed in interleaved rounds in one process
(``experiments.timing.time_plans``, the harness of ``tessera tune``), then profiled inside the network:

- ``plan``: the solver's plan, which places each prologue where it is priced cheapest;
- ``uniform, per row`` / ``separate`` / ``on read``: the uniform plan in the first layout with every prologue
  computed per row (the template's default), as a separate pass inside the kernel (what running it as an operator
  of its own costs, minus the call), or on every read.

Prints each plan's predicted and measured milliseconds, the profiled time of the convolutions with a prologue, and
how many prologues the plan places where. With ``--kernels``, instead: DenseNet's 1x1 convolutions timed alone
(``tessera tune``'s default timing) without a prologue and with each placement. Run it with nothing else on the
machine and record its CPU and vector unit.

    .venv/bin/python benchmarks/prologue.py --models densenet121 --threads 2 --cache costs.sqlite
    .venv/bin/python benchmarks/prologue.py --kernels --threads 2
"""

from __future__ import annotations

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
from search.plan import Plan, baseline_plan  # noqa: E402
from search.templates.conv2d import ON_READ, PER_ROW, SEPARATE  # noqa: E402
from solvers import solve  # noqa: E402

PLACEMENTS = {PER_ROW: "per row", SEPARATE: "separate", ON_READ: "on read"}


def placed(plan: Plan, graph, where: int) -> Plan:
    """``plan`` with every prologue computed at ``where``."""
    choices = dict(plan.choices)
    for op in graph.tunable:
        if op.attrs.get("prologue"):
            old = Candidate.parse(choices[op.name])
            choices[op.name] = Candidate(old.in_layout, old.out_layout,
                                         tuple(sorted({**dict(old.knobs), "prologue": where}.items()))).name
    return Plan(choices, plan.model, plan.args, plan.vector_unit)


def prologue_ms(graph, profile) -> float:
    """Profiled milliseconds per run of the calls that compute a convolution with a prologue."""
    convs = {op.name for op in graph.tunable if op.attrs.get("prologue")}
    return sum(call.ms for call in profile.calls if any(o.op in convs for o in call.computes))


KERNELS = ((160, 56), (256, 56), (448, 28), (960, 14), (1536, 7))  # (input channels, size) of 1x1 convs, 128 out


def time_kernels(threads: int) -> None:
    """Each of ``KERNELS`` in NCHW16c and NHWC to NCHW16c (bias and ReLU after), timed alone: medians in ms."""
    from cost_models.cache import DEFAULT_TIMING
    from cost_models.timer import time_kernel
    from search.host import make_target
    from search.kinds import kernel_kind
    from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec

    kind, target = kernel_kind("conv2d"), make_target(threads)
    print(f"\n### 1x1 convolutions alone: {host().cpu}, vector unit {HOST.name}, {threads} threads, "
          f"{DEFAULT_TIMING} timing\n")
    print("| input | layout in | no prologue | " + " | ".join(PLACEMENTS.values()) + " |")
    print("| --- | --- | ---: |" + " ---: |" * len(PLACEMENTS))
    for channels, size in KERNELS:
        workload = Conv2DWorkload(1, channels, size, size, 128, (1, 1), (1, 1), (0, 0, 0, 0))
        for in_layout in ("NCHW16c", "NHWC"):
            specs = [KernelSpec(workload, in_layout, "NCHW16c", (), Epilogue(True, False, "relu"))]
            with_prologue = Epilogue(True, False, "relu", prologue=True)
            for where in PLACEMENTS:
                knobs = dict(kind.knob_space(KernelSpec(workload, in_layout, "NCHW16c", (), with_prologue))[0])
                knobs["prologue"] = where
                specs.append(KernelSpec(workload, in_layout, "NCHW16c", tuple(sorted(knobs.items())), with_prologue))
            times = [time_kernel(kind.build(spec, target), target=target, threads=threads,
                                 method=DEFAULT_TIMING).median_ms for spec in specs]
            print(f"| {channels}x{size}x{size} | {in_layout} | " + " | ".join(f"{t:.3f}" for t in times) + " |")


def main() -> None:
    args = variant_benchmark_args(__doc__.split("\n")[0], model="densenet121", layouts=["NCHW16c"], space_size=3,
                                  kernels="time DenseNet's 1x1 convolutions alone instead")
    if args.kernels:
        time_kernels(args.threads)
        return
    uniform_name = args.layouts[0].lower()
    for model in args.models:
        extracted = extract(model, threads=args.threads, cache=args.cache, layouts=args.layouts,
                            space_size=args.space_size, baselines=[uniform_name], costs="measured")
        graph = extracted.graph
        plan = extracted.plan(solve(extracted.problem))
        uniform = baseline_plan(graph, uniform_name, extracted.model, extracted.args)
        plans = {"plan": plan, **{f"{uniform_name}, {label}": placed(uniform, graph, where)
                                  for where, label in PLACEMENTS.items()}}
        chosen = Counter(PLACEMENTS[dict(Candidate.parse(plan.choices[op.name]).knobs)["prologue"]]
                         for op in graph.tunable if op.attrs.get("prologue"))
        timed = time_plans(extracted, plans, repeat=args.rounds, profile_runs=args.profile_runs)
        print(f"\n### {model}: {host().cpu}, vector unit {HOST.name}, {args.threads} threads; layouts "
              f"{', '.join(args.layouts)}, space {args.space_size}; {extracted.new} of {extracted.tasks} tasks "
              f"measured; load {timed.load[0]:.2f} -> {timed.load[1]:.2f}")
        print(f"{sum(chosen.values())} convolutions read through a prologue; the plan computes them "
              f"{', '.join(f'{n} {label}' for label, n in chosen.most_common())}\n")
        print("\n".join(plan_table(timed, "prologue convs ms (profile)",
                                   partial(prologue_ms, graph))))


if __name__ == "__main__":
    main()
