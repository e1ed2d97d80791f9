"""Concats in place against concats that copy, end to end: what the choice saves in a network and what it was priced.

For each network: the cost problem is extracted from ``--cache`` (measuring what it lacks, with ``tessera tune``'s
default timing), the auto solver's plan taken, and each plan below exported, checked and timed in interleaved rounds
in one process (``experiments.timing.time_plans``, the harness of ``tessera tune``), then profiled inside the network:

- ``plan``: the solver's plan, which runs the concats in place where that is priced cheaper;
- ``plan, copies``: the same plan with every in-place concat copying again (in the same layout);
  (a concat family - a dense block's concats, sharing one buffer - runs in place or copies as a whole)
- ``nchw16c, in place`` and ``nchw16c``: the uniform NCHW16c baseline with and without every concat that can run in
  place doing so.

Prints each plan's predicted and measured milliseconds and the time its profile spends in concat calls. Run it with
nothing else on the machine and record its CPU and vector unit.

    .venv/bin/python benchmarks/in_place.py --models inception_v3 --threads 2 --cache costs.sqlite
    .venv/bin/python benchmarks/in_place.py --models densenet121 --layouts NCHW16c --space-size 3
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.extraction import extract  # noqa: E402
from experiments.timing import plan_table, time_plans, variant_benchmark_args  # noqa: E402
from search.candidates import Candidate  # noqa: E402
from search.errors import SearchError  # noqa: E402
from search.host import host  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import IN_PLACE  # noqa: E402
from search.kinds.base import VIEW_OF, VIEWS  # noqa: E402
from search.plan import Plan, baseline_plan, validate  # noqa: E402
from solvers import solve  # noqa: E402


def with_concats(plan: Plan, graph, in_place: bool) -> Plan:
    """``plan`` with every concat family that can run in place in its owner's layout doing so (``in_place``; where
    the plan's producers and views agree on that layout) or copying, each in its own layout."""
    choices = dict(plan.choices)
    for op in graph.tunable:
        if op.kind != "concat" or not op.attrs.get(IN_PLACE) or VIEW_OF in op.attrs:
            continue
        family = [op.name, *op.attrs.get(VIEWS, ())]
        old = {name: Candidate.parse(choices[name]) for name in family}
        knobs = ((IN_PLACE, 1),) if in_place else ()
        owner = old[op.name].out_layout
        trial = {**choices, **{name: (Candidate(owner, owner, knobs) if in_place else
                                      Candidate(c.in_layout, c.out_layout)).name for name, c in old.items()}}
        try:
            validate(Plan(trial), graph)
        except SearchError:  # producers or views in other layouts: leave the family as the plan has it
            continue
        choices = trial
    return Plan(choices, plan.model, plan.args, plan.vector_unit)


def concat_ms(profile) -> float:
    """Profiled milliseconds per run of the calls that compute a concat (its copy, and what export fused into it)."""
    return sum(call.ms for call in profile.calls if any(o.op.startswith("concat_") and not o.is_transform
                                                         for o in call.computes))


def main() -> None:
    args = variant_benchmark_args(__doc__.split("\n")[0], model="inception_v3", layouts=None, space_size=None)
    for model in args.models:
        extracted = extract(model, threads=args.threads, cache=args.cache, layouts=args.layouts,
                            space_size=args.space_size, costs="measured")
        graph = extracted.graph
        plan = extracted.plan(solve(extracted.problem))
        uniform = baseline_plan(graph, "nchw16c", extracted.model, extracted.args)
        plans = {"plan": plan, "plan, copies": with_concats(plan, graph, False),
                 "nchw16c, in place": with_concats(uniform, graph, True), "nchw16c": uniform}
        eligible = sum(1 for op in graph.tunable if op.kind == "concat" and op.attrs.get(IN_PLACE))  # views too
        chosen = sum(1 for op in graph.tunable if Candidate.parse(plan.choices[op.name]).in_place)
        timed = time_plans(extracted, plans, repeat=args.rounds, profile_runs=args.profile_runs)
        print(f"\n### {model}: {host().cpu}, vector unit {HOST.name}, {args.threads} threads; {extracted.new} of "
              f"{extracted.tasks} tasks measured; load {timed.load[0]:.2f} -> {timed.load[1]:.2f}")
        print(f"{eligible} of {sum(op.kind == 'concat' for op in graph.tunable)} concats can run in place; the "
              f"solver runs {chosen} in place\n")
        print("\n".join(plan_table(timed, "concat calls ms (profile)", concat_ms)))


if __name__ == "__main__":
    main()
