"""How well the cost problem predicts the exported network: per kernel, per timing method, and end to end.

For each network (a zoo name, or an ONNX file bound by ``--input-shape``, whose operators outside the registered
kinds run as fixed operators): the problem is extracted as ``tessera tune`` extracts it with its defaults (the default
space and ``--timing``, ``context``; ``--timing warm`` gives the plans the runs in docs/fidelity.md compared), and six
plans are exported, numerically checked and timed end to end in interleaved rounds (``experiments.timing.time_plans``,
the in-process harness of ``tessera tune``): the auto and greedy plans and the uniform NCHW, NHWC, NCHW8c and NCHW16c
baselines. Each is then profiled inside the network (``search.profile``), the profile scaled to the plan's measured
median as ``tune`` scales it (the in-network times below are the scaled profiles'; the drift of section 4 is the raw
profiles' against the timing).

1. Timing methods. Every kernel the six plans run is also timed alone with each method (the same cache); each
   method's isolated times are compared with the kernels' in-network times: median absolute relative error, the total
   over the kernels, and Spearman's rank correlation.
2. End to end. Each plan's prediction against its measured median: the problem's cost of the plan (the extraction's
   timings), the same priced with each other method, and calibrated leave-one-out: the other five plans' in-network
   times and calibration factors (``cost_models.calibration.Factors``: by kind, or by kind and layout) price it, plus
   its calls outside the problem's terms priced by the other five's profiled calls
   (``experiments.calibrate.Unpriced``). The rank correlation of predicted and measured order, and whether the
   solver's plan is faster than the best baseline.
3. Where the time goes: each plan's profile grouped by what its calls compute (kernels by kind, transforms, layout
   nodes with what is fused into them, followers, fixed operators, the VM's own time, and per call) beside the
   problem's terms.
4. Where the calibrated prediction misses (``cost_models.prediction_error``): each plan's leave-one-out error split
   into its kernels' (with their chains), its transforms', the unpriced time's and the machine's drift between the
   profile and the timing rounds, as shares of the measured median that add up to the whole error.
5. The time the problem does not price, per plan: its own profile's (scaled to its measured median), against the
   median of the other plans' (one figure for every plan, as ``tune`` priced it before) and its calls priced by
   theirs (``cost_models.unpriced``), the errors as shares of the measured median.

Prints markdown. Measuring fills the cache: run with nothing else on the machine and record its CPU and vector unit.

    .venv/bin/python benchmarks/fidelity.py --models resnet50 inception_v3 --threads 2 --cache costs.sqlite
    .venv/bin/python benchmarks/fidelity.py --models det.onnx --input-shape 1,3,320,320 --cache costs.sqlite
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.cache import DEFAULT_TIMING, TIMING_METHODS, CostCache  # noqa: E402
from cost_models.calibration import Factors, bare_bases, network_times  # noqa: E402
from cost_models.measure import MeasuredCosts  # noqa: E402
from cost_models.prediction_error import PARTS, priced_problem, split_error  # noqa: E402
from cost_models.pricing import measurement_tasks, plan_cost  # noqa: E402
from cost_models.sources import MeasuredSource  # noqa: E402
from cost_models.tasks import KernelTask  # noqa: E402
from cost_models.unpriced import UnpricedCalls, estimate, plan_calls  # noqa: E402
from experiments.calibrate import Unpriced, scaled_profiles  # noqa: E402
from experiments.extraction import extract  # noqa: E402
from experiments.timing import time_plans  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import KernelKind, get_kind  # noqa: E402
from search.plan import baseline_plan, plan_from_assignment, validate  # noqa: E402
from search.space import tuning_space  # noqa: E402
from search.threads import use_threads  # noqa: E402
from solvers import solve  # noqa: E402

UNIFORM = ("nchw", "nhwc", "nchw8c", "nchw16c")


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation."""
    return float(spearmanr(xs, ys).statistic)


def group(graph, call) -> str:
    """What a profiled call computes, as a residual category (``CATEGORIES``)."""
    ops = [graph.op(origin.op) for origin in call.computes if not origin.is_transform]
    if not ops:
        return "layout transforms" if call.computes else "other"
    tunable = [op for op in ops if op.role == "tunable"]
    if tunable:
        kind = tunable[0].kind
        return f"{kind} kernels" if isinstance(get_kind(kind), KernelKind) else f"{kind} (with fused followers)"
    return "followers" if all(op.role == "follower" for op in ops) else "fixed operators"


def isolated(tasks: list, cache: str, threads: int, method: str) -> dict:
    """``tasks``' isolated median times (ms) with timing ``method`` (measured where the cache lacks them)."""
    with MeasuredCosts(CostCache(cache), target=make_target(threads), threads=threads, timing=method) as measured:
        return {task: record.median_ms for task, record in zip(tasks, measured.measure(tasks)) if record.ok}


def run(model: str, args) -> list[str]:
    extracted = extract(model, threads=args.threads, cache=args.cache, baselines=UNIFORM, input_shape=args.input_shape,
                        costs=MeasuredSource(timing=args.timing))
    graph, problem = extracted.graph, extracted.problem
    auxiliary = problem.meta["auxiliary"]
    plans = {name: plan_from_assignment(solve(problem, name).assignment, model, extracted.args, auxiliary=auxiliary)
             for name in ("auto", "greedy")}
    plans.update({name: baseline_plan(graph, name, model, extracted.args) for name in UNIFORM})
    timed = time_plans(extracted, plans, repeat=args.rounds, profile_runs=args.profile_runs)
    measured, profiles, load = timed.medians(), timed.profiles, timed.load
    chosen = {label: validate(plan, graph) for label, plan in plans.items()}
    source = {label: profiles.get(label) or next(p for other, p in profiles.items()
                                                 if plans[other].choices == plans[label].choices) for label in plans}
    bases = bare_bases(profiles.values())
    scaled, scaled_bases = scaled_profiles(source, measured)  # each at its plan's measured median, as tune scales them
    in_network = {label: network_times(graph, chosen[label], scaled[label], scaled_bases) for label in plans}
    lines = [f"### {model}", "",
             f"{len(plans)} plans, {args.rounds} interleaved rounds; 1-min load average {load[0]:.2f} -> {load[1]:.2f}",
             ""]

    # 1. timing methods against in-network kernel times
    kernels = {task: ms for times in in_network.values() for task, ms in times.items() if isinstance(task, KernelTask)}
    per_method = {method: isolated(list(kernels), args.cache, args.threads, method) for method in TIMING_METHODS}
    lines += ["| timing method | median abs error | total isolated / in network | rank correlation |",
              "| --- | ---: | ---: | ---: |"]
    for method, times in per_method.items():
        common = [task for task in kernels if task in times]
        errors = [abs(times[t] / kernels[t] - 1) for t in common]
        total = sum(times[t] for t in common) / sum(kernels[t] for t in common)
        lines.append(f"| {method} | {100 * statistics.median(errors):.1f}% | {total:.3f} | "
                     f"{spearman([times[t] for t in common], [kernels[t] for t in common]):.3f} |")

    # 2. end to end
    space = tuning_space(graph, baselines=UNIFORM)
    tasks = [task for task in measurement_tasks(graph, space) if not task.free]
    base = isolated(tasks, args.cache, args.threads, args.timing)
    used = list({task for times in in_network.values() for task in times})
    priced = {method: priced_problem(graph, space, {**base, **isolated(used, args.cache, args.threads, method)})
              for method in TIMING_METHODS}
    predictions = {method: {label: plan_cost(priced[method], plan.choices) for label, plan in plans.items()}
                   for method in TIMING_METHODS}
    calibrated = {}
    for name, by_layout in (("calibrated", False), ("calibrated by layout", True)):
        calibrated[name] = {label: leave_one_out(label, graph, space, base, in_network, plans, measured, scaled,
                                                 timed.calls, by_layout) for label in plans}
        predictions[name] = {label: plan_cost(priced_problem(graph, space, times), plans[label].choices) + unpriced
                             for label, (times, unpriced) in calibrated[name].items()}
    lines += ["", "| plan | measured ms (IQR) | " + " | ".join(f"predicted {m}" for m in predictions) + " |",
              "| --- | ---: |" + " ---: |" * len(predictions)]
    for label in plans:
        latency = timed.timings[label].latency
        cells = [f"{values[label]:.2f} ({100 * (values[label] / measured[label] - 1):+.1f}%)"
                 for values in predictions.values()]
        lines.append(f"| {label} | {latency['median_ms']:.2f} ({latency['spread_ms']:.2f}) | " + " | ".join(cells)
                     + " |")
    lines.append("")
    for name, values in predictions.items():
        correlation = spearman([values[p] for p in plans], [measured[p] for p in plans])
        lines.append(f"- rank correlation of predicted and measured plans, {name}: {correlation:.3f}")
    best = min(UNIFORM, key=measured.__getitem__)
    lines.append(f"- the auto plan / best baseline ({best}): {measured['auto'] / measured[best]:.3f}")

    # 3. where the time goes
    lines += ["", "| plan | " + " | ".join(CATEGORIES) + " | VM | calls | VM per call (us) | problem prices |",
              "| --- |" + " ---: |" * (len(CATEGORIES) + 4)]
    for label in plans:
        totals: dict[str, float] = defaultdict(float)
        for call in source[label].calls:
            totals[group(graph, call)] += call.ms
        lines.append(f"| {label} | " + " | ".join(f"{totals.get(c, 0.0):.2f}" for c in CATEGORIES)
                     + f" | {source[label].overhead_ms:.2f} | {len(source[label].calls)} | "
                     f"{1000 * source[label].overhead_ms / len(source[label].calls):.1f} | "
                     f"{predictions[args.timing][label]:.2f} |")

    # 4. where the calibrated prediction misses
    lines += ["", "| plan | measured ms | calibrated prediction | " + " | ".join(PARTS) + " |",
              "| --- | ---: | ---: |" + " ---: |" * len(PARTS)]
    for label in plans:
        times, unpriced = calibrated["calibrated"][label]
        split = split_error(graph, space, times, unpriced, chosen[label], source[label], measured[label], bases)
        shares = split.relative()
        lines.append(f"| {label} | {measured[label]:.2f} | {predictions['calibrated'][label]:.2f} "
                     f"({100 * shares['total']:+.1f}%) | " + " | ".join(f"{100 * shares[p]:+.1f}%" for p in PARTS)
                     + " |")

    # 5. the unpriced time: one median for every plan against call by call
    lines += ["", "| plan | unpriced ms (own profile) | median of the others' | call by call |",
              "| --- | ---: | ---: | ---: |"]
    unpriced = {label: UnpricedCalls.of(graph, chosen[label], scaled[label], scaled_bases) for label in plans}
    for label in plans:
        others = [unpriced[other] for other in plans if plans[other].choices != plans[label].choices]
        if not others:
            continue
        median = statistics.median(other.total_ms for other in others)
        calls = estimate(plan_calls(graph, chosen[label], timed.calls[label]), others)
        own = unpriced[label].total_ms
        lines.append(f"| {label} | {own:.3f} | " + " | ".join(
            f"{ms:.3f} ({100 * (ms - own) / measured[label]:+.1f}%)" for ms in (median, calls)) + " |")
    return lines + [""]


CATEGORIES = ("conv2d kernels", "depthwise_conv2d kernels", "dense kernels", "layout transforms",
              "concat (with fused followers)", "add (with fused followers)", "followers", "fixed operators")


def leave_one_out(label, graph, space, isolated_ms: dict, in_network: dict, plans: dict, measured: dict,
                  profiles: dict, calls: dict, by_layout: bool) -> tuple[dict, float]:
    """``label``'s prediction calibrated on the other plans only, as task prices and the time the problem does not
    price: their in-network times, the calibration factors (``cost_models.calibration.Factors``, by kind, or by kind
    and layout) of their ratios to the isolated times (read off the solvers' plans' tasks where there are enough, as
    ``tune`` does), and the plan's calls (``calls``) priced by their profiles' (``profiles``) as ``tune`` prices them
    (``experiments.calibrate.Unpriced``)."""
    others = [other for other in plans if plans[other].choices != plans[label].choices]
    known = {task: ms for other in others for task, ms in in_network[other].items()}
    chosen = {task.key for other in others if other not in UNIFORM for task in in_network[other]}
    factors = Factors.fit({task: ms / isolated_ms[task] for task, ms in known.items() if isolated_ms.get(task)},
                          by_layout, chosen=chosen)
    times = {task: ms * factors.of(task) for task, ms in isolated_ms.items()} | known
    problem = priced_problem(graph, space, times)
    if not others:
        return times, 0.0
    unpriced = Unpriced.fit(graph, problem, {other: plans[other] for other in others},
                            {other: profiles[other] for other in others}, measured)
    return times, unpriced.offset(graph, plans[label], calls[label])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "inception_v3", "densenet201", "ssd_resnet50_512"],
                        help="zoo names or .onnx files")
    parser.add_argument("--input-shape", action="append", default=None, metavar="[NAME=]D0,D1,...",
                        help="an input's shape, as tessera tune takes it (binds an ONNX file's dynamic dimensions)")
    parser.add_argument("--timing", choices=TIMING_METHODS, default=DEFAULT_TIMING,
                        help="the extraction's isolated timing method, tessera tune's default unless given")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10, help="interleaved end-to-end timing rounds")
    parser.add_argument("--profile-runs", type=int, default=20, help="runs of each profile")
    parser.add_argument("--cache", default=str(Path("~/.cache/tessera/costs.sqlite").expanduser()))
    args = parser.parse_args()
    use_threads(args.threads)
    print(f"CPU {host().cpu}, vector unit {HOST.name}, {args.threads} threads, extraction timing {args.timing}")
    for model in args.models:
        print("\n".join(run(model, args)), flush=True)


if __name__ == "__main__":
    main()
