"""Export, check and time plans end to end: each distinct plan exported and checked once, then all timed in
interleaved rounds in this process (the harness that defines a plan's measured latency), and profiled inside the
network on request."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from experiments.tune import Extracted
    from search.artifact import Artifact


def timing_line(plans: dict[str, Any], repeat: int, profile: bool) -> str:
    """What ``time_plans`` is about to do, as one progress line."""
    distinct = len({tuple(sorted(plan.choices.items())) for plan in plans.values()})
    baselines = ", ".join(label for label in plans if not label.startswith("solver:"))
    profiled = ", then profiled inside the network" if profile else ""
    return (f"exporting and checking {distinct} distinct plans (the solver's and the uniform baselines {baselines}), "
            f"timing them in {repeat} interleaved rounds{profiled}")


def predicted_cost(problem: Any, plan: Any) -> float | None:
    """The problem's cost of ``plan`` (ms), None where the problem forbids one of its choices: a baseline runs every
    kernel at its default knobs, also one whose isolated measurement failed (a build that timed out, say)."""
    import math

    from cost_models.pricing import plan_cost

    cost = plan_cost(problem, plan.choices)
    return cost if math.isfinite(cost) else None


def time_plans(extracted: Extracted, plans: dict[str, Any], *, repeat: int, keep: dict[str, Path] | None = None,
               profile_runs: int = 0) -> tuple[dict[str, dict[str, Any]], list[float], dict[str, Any]]:
    """Export and check each distinct plan once, then time them all in interleaved rounds.

    ``plans`` maps labels to ``Plan``s; the artifact of a label in ``keep`` is saved to its directory, the others
    to a temporary one. Returns per label the predicted cost, the numerical check's error and the latency (labels
    with identical plans share one export and timing), the 1-minute load average before and after timing, and with
    ``profile_runs`` each distinct plan's profile inside the network (``search.profile``) by label.
    """
    from search.artifact import load_artifact
    from search.export import export, reference_outputs
    from search.host import make_target
    from search.profile import profile_artifact

    graph, problem, threads = extracted.graph, extracted.problem, extracted.problem.meta["threads"]
    target = make_target(threads)
    seed = extracted.args["seed"]
    reference = reference_outputs(graph, target, seed)
    keep = keep or {}
    distinct: dict[tuple, str] = {}  # choices -> the first label with them
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tessera-plans-") as scratch:
        artifacts = {}
        for index, (label, plan) in enumerate(plans.items()):
            key = tuple(sorted(plan.choices.items()))
            if key in distinct:
                results[label] = results[distinct[key]]
                continue
            distinct[key] = label
            # always loaded from a fresh path: a process that loaded a library keeps using it for that path
            where = Path(scratch) / f"plan{index}"
            compiled = export(graph, plan, target=target, threads=threads, seed=seed, reference=reference)
            compiled.save(where)
            if label in keep:
                shutil.copytree(where, keep[label], dirs_exist_ok=True)
            artifacts[label] = load_artifact(where)
            results[label] = {"predicted_ms": predicted_cost(problem, plan),
                              "relative_error": compiled.manifest["numerical_check"]["relative_error"]}
        load = [os.getloadavg()[0]]
        for label, latency in interleaved_latency(artifacts, rounds=repeat, threads=threads).items():
            results[label]["latency"] = latency
        load.append(os.getloadavg()[0])
        profiles = {label: profile_artifact(artifact, runs=profile_runs, seed=seed)
                    for label, artifact in artifacts.items()} if profile_runs else {}
    return {label: dict(result) for label, result in results.items()}, load, profiles


def plan_table(results: dict[str, dict[str, Any]], profiles: dict[str, Any], column: str,
               profiled: Callable[[Any], float]) -> list[str]:
    """Markdown lines tabulating ``time_plans``' results: per label the predicted and measured milliseconds, the
    profiled figure ``profiled(profile)`` headed ``column`` ("(as above)" for a plan equal to an earlier label's) and
    the numerical check's relative error."""
    lines = [f"| plan | predicted ms | measured ms (IQR) | {column} | relative error |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for label, result in results.items():
        latency, profile = result["latency"], profiles.get(label)
        figure = "(as above)" if profile is None else f"{profiled(profile):.2f}"
        lines.append(f"| {label} | {result['predicted_ms']:.2f} | {latency['median_ms']:.2f} "
                     f"({latency['spread_ms']:.2f}) | {figure} | {result['relative_error']:.1e} |")
    return lines


def variant_benchmark_args(description: str, *, model: str, layouts: list[str] | None, space_size: int | None,
                           kernels: str | None = None) -> argparse.Namespace:
    """The command line of the benchmarks that time a network's plan beside variants of it (``benchmarks/prologue.py``,
    ``in_place.py``, ``depthwise_pairs.py``): ``--models`` (default ``model``), ``--threads``, ``--cache``,
    ``--layouts`` and ``--space-size`` (defaults as given; None: ``tessera tune``'s), ``--rounds``,
    ``--profile-runs`` and, with ``kernels`` (its help), ``--kernels``. Counts below 1 exit with a usage error."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", nargs="+", default=[model])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache", default="costs.sqlite")
    parser.add_argument("--layouts", nargs="+", default=layouts,
                        help="the searched layouts (default: %(default)s; None: tune's)")
    parser.add_argument("--space-size", type=int, default=space_size,
                        help="candidates per node (default: %(default)s; None: tune's)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile-runs", type=int, default=20)
    if kernels:
        parser.add_argument("--kernels", action="store_true", help=kernels)
    args = parser.parse_args()
    if min(args.rounds, args.profile_runs, args.threads, args.space_size or 1) < 1:
        parser.error("--rounds, --profile-runs, --threads and --space-size must be positive")
    return args


def interleaved_latency(artifacts: dict[str, Artifact], *, rounds: int, threads: int) -> dict[str, dict[str, Any]]:
    """End-to-end latency of several artifacts, measured in turns so that load from other processes on a shared
    machine hits them all alike.

    Each of ``rounds`` rounds times every artifact once (``number`` runs of about 50 ms in all, fixed per artifact at
    its first round), starting one artifact later each round. Returns, per artifact, the median, quartiles, extremes
    and interquartile ``spread_ms`` of the per-round times in milliseconds.
    """
    from search.artifact import measure_latency
    from search.interleave import interleave, latency_summary

    numbers: dict[str, int] = {}
    runtime_threads = threads

    def timer(label: str) -> Callable[[], float]:
        def measure() -> float:
            nonlocal runtime_threads
            latency = measure_latency(artifacts[label], repeat=1, number=numbers.get(label), threads=threads)
            numbers[label], runtime_threads = latency.number, latency.runtime_threads
            return latency.median_ms

        return measure

    samples = interleave({label: timer(label) for label in artifacts}, rounds)
    return {label: {**latency_summary(values), "number": numbers[label], "threads": threads,
                    "runtime_threads": runtime_threads} for label, values in samples.items()}
