"""What ``tune`` reports: each timed plan's prediction and measurement (``PlanResult``), the run's summary as written
to ``summary.json`` (``summary``) and its printed lines (``format_summary``)."""

from __future__ import annotations

import importlib.metadata
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.timing import unsteady_text
from search.threads import usable_cores

if TYPE_CHECKING:
    from experiments.extraction import Extracted
    from experiments.phases import PhaseClock
    from experiments.timing import PlanTiming, TimedPlans

TUNED_ARTIFACT = "artifact"
PICTURE = "plan.svg"
SOLVER_LABEL = "solver:"
"""Prefix of a solver's plan among the timed plans (``solver:auto``); the uniform baselines go by their names."""


def solver_label(name: str) -> str:
    """The label of solver ``name``'s plan among the timed plans and in the calibration rounds."""
    return SOLVER_LABEL + name


@dataclass(frozen=True)
class PlanResult:
    """A timed plan's final prediction beside its measurement: ``predicted_ms`` (with calibration, the calibrated
    cost plus the unpriced time ``unpriced_ms``, carried by ``window`` to the machine's speed of the timing;
    ``predicted_calibration_window_ms`` before that; ``predicted_isolated_ms`` the isolated timings' cost)."""

    timing: PlanTiming
    predicted_ms: float | None
    predicted_isolated_ms: float | None = None
    predicted_calibration_window_ms: float | None = None
    window: float | None = None
    unpriced_ms: float | None = None

    @property
    def median_ms(self) -> float:
        return self.timing.median_ms

    def to_dict(self) -> dict[str, Any]:
        out = {"predicted_ms": self.predicted_ms, "relative_error": self.timing.relative_error,
               "latency": self.timing.latency}
        if self.window is not None:
            out |= {"predicted_isolated_ms": self.predicted_isolated_ms,
                    "predicted_calibration_window_ms": self.predicted_calibration_window_ms, "window": self.window,
                    "unpriced_ms": self.unpriced_ms}
        return out


def solution_dict(solution: Any) -> dict[str, Any]:
    """A solver's solution as the summary reports it (without the assignment)."""
    return {key: value for key, value in solution.to_dict().items() if key != "assignment"}


def summary(extracted: Extracted, solutions: dict[str, Any], errors: dict[str, str], best: str,
            results: dict[str, PlanResult], timed: TimedPlans, directory: Path) -> dict[str, Any]:
    """The summary of a tune (``summary.json``): the network, settings and versions, the problem, the measurements,
    the best solver's solution and plan, the baselines with the plan's speed-up over each, the written files, the
    labels whose timing was unsteady (``unsteady``: ``experiments.timing.UNSTEADY``) and, with several solvers, each
    one's solution and plan."""
    import tvm

    problem, target = extracted.problem, extracted.settings.target
    plan, solved = results[solver_label(best)], {solver_label(name) for name in solutions}
    baselines = {label: {**result.to_dict(), "speedup": result.median_ms / plan.median_ms}
                 for label, result in results.items() if label not in solved}
    out = {
        "model": extracted.model,
        "args": extracted.args,
        "input_shapes": {name: list(shape) for name, shape in extracted.graph.inputs},
        "threads": extracted.settings.threads,
        "target": {"kind": target.kind.name, "mcpu": str(target.attrs.get("mcpu", "")),
                   "num-cores": int(target.attrs.get("num-cores", 0))},
        "versions": {"tessera": importlib.metadata.version("tessera"), "tvm": tvm.__version__,
                     "python": platform.python_version()},
        "problem": {"nodes": problem.num_nodes, "edges": len(problem.edges), "candidates": sum(problem.domain_sizes),
                    "layouts": list(extracted.layouts), "space_size": extracted.space_size,
                    "precision": extracted.precision},
        "measurements": {**extracted.costs, "tasks": extracted.tasks, "new": extracted.new,
                         "cached": extracted.tasks - extracted.new - extracted.costs.get("predicted", 0),
                         "failed": extracted.failed, "seconds": extracted.seconds},
        "solver": solution_dict(solutions[best]),
        "plan": {**plan.to_dict(), "operators": len(extracted.graph.tunable),
                 "bf16_nodes": extracted.plan(solutions[best]).bf16_nodes,
                 "bf16_values": extracted.plan(solutions[best]).bf16_values,
                 "int8_nodes": extracted.plan(solutions[best]).int8_nodes},
        "baselines": baselines,
        "files": {"problem": str(directory / "problem.json"), "plan": str(directory / "plan.json"),
                  "artifact": str(directory / TUNED_ARTIFACT), "picture": str(directory / PICTURE)},
        "load_average_1min": {"before_latency": timed.load[0], "after_latency": timed.load[1]},
    }
    if timed.wakeup is not None:
        out["wakeup"] = {"before_latency": timed.wakeup[0].to_dict(), "after_latency": timed.wakeup[1].to_dict()}
    if unsteady := timed.unsteady():
        out["unsteady"] = unsteady
    if len(solutions) + len(errors) > 1:
        speedups = {name: base["latency"]["median_ms"] for name, base in baselines.items()}
        out["solvers"] = {name: {**solution_dict(solution), **results[solver_label(name)].to_dict(),
                                 "speedup": {base: ms / results[solver_label(name)].median_ms
                                             for base, ms in speedups.items()}}
                          for name, solution in solutions.items()}
        out["solvers"] |= {name: {"solver": name, "error": error} for name, error in errors.items()}
    return out


def _wakeup_span(wakeup: dict[str, Any]) -> str:
    """``29 -> 42 us``: the cross-core wake-up round trip before and after a timing (``cost_models.wakeup``)."""
    return " -> ".join(f"{wakeup[when]['median_us']:.0f}" for when in ("before_latency", "after_latency")) + " us"


PHASES = {"measure": "measuring", "solve": "solving", "export": "exporting and checking", "latency": "timing",
          "profile": "profiling", "drift_check": "drift checks", "calibration": "calibrating",
          "report": "reporting", "other": "other"}
"""A tune's phases (``PhaseClock`` names) and how the summary's printed line calls them."""


def time_spent(clock: PhaseClock, total: float, measuring: dict[str, float]) -> dict[str, Any]:
    """Where a tune's ``total`` wall seconds went: the ``clock``'s phases (``other``: outside any), and the builds and
    timings of the measuring phase (``measuring``: ``CostProvider.spent``)."""
    phases = dict(clock.seconds)
    phases["other"] = max(total - sum(phases.values()), 0.0)
    return {"seconds": total, "phases": phases, "measure": dict(measuring)}


def _time_line(spent: dict[str, Any]) -> str:
    """The summary's ``time`` as one line: the total, then each phase (those under 0.05 s left out)."""
    total, parts = spent["seconds"], []
    for name, seconds in spent["phases"].items():
        if seconds < 0.05:
            continue
        split = ", ".join(f"{what} {value:.1f} s" for what, value in spent["measure"].items()) \
            if name == "measure" and spent["measure"] else ""
        parts.append(f"{PHASES.get(name, name)} {seconds:.1f} s" + (f" ({split})" if split else ""))
    minutes = f"{int(total // 60)} min {total % 60:.0f} s" if total >= 60 else f"{total:.1f} s"
    return f"time: {minutes}: " + ", ".join(parts)


def _shapes(shapes: dict[str, list[int]]) -> str:
    return ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items())


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _solver_line(solver: dict[str, Any]) -> str:
    if "error" in solver:
        return f"solver {solver['solver']}: no plan ({solver['error']})"
    gap = "-" if solver["gap"] is None else f"{100 * solver['gap']:.2f}%"
    line = (f"solver {solver['solver']}: cost {_ms(solver['cost'])}, {solver['status']}, gap {gap} "
            f"(lower bound {_ms(solver['lower_bound'])}), {solver['seconds']:.3g} s")
    if "latency" in solver:
        line += (f"; measured {_ms(solver['latency']['median_ms'])} median (spread "
                 f"{_ms(solver['latency']['spread_ms'])})")
        if solver["speedup"]:
            best = min(solver["speedup"].items(), key=lambda item: item[1])
            line += f", {best[1]:.2f}x the best baseline ({best[0]})"
    return line


def _moved_line(s: dict[str, Any]) -> str | None:
    """A warning where the last timing ran at another speed than the calibration round, beyond the drift check's
    tolerance: plans were seen to move unevenly across such a change of the machine's state, which one window factor
    per plan does not carry (docs/fidelity.md)."""
    from cost_models.drift import DRIFT_TOLERANCE

    windows = [result["window"] for result in (s["plan"], *s["baselines"].values()) if result.get("window")]
    if not windows or all(1 / (1 + DRIFT_TOLERANCE) <= window <= 1 + DRIFT_TOLERANCE for window in windows):
        return None
    return (f"warning: the machine ran x{min(windows):.2f}-{max(windows):.2f} the calibration round's time in the "
            "timing above; plans were seen to move unevenly across such a change, so the predictions carried by those "
            "factors are that much less certain")


def _window(result: dict[str, Any]) -> str:
    window = result.get("window", 1.0)
    return "" if window == 1.0 else (f"; {_ms(result['predicted_calibration_window_ms'])} at the calibration "
                                     f"round's speed, the machine x{window:.3f} since")


def _predicted_note(m: dict[str, Any]) -> str:
    if "predicted" not in m:  # a source that predicts nothing (measured)
        return ""
    return f"; {m['source']} costs from {m['model']}: {m['predicted']} of {m['tasks']} tasks predicted"


def _round_line(entry: dict[str, Any], solver: str) -> str:
    """One calibration round: each measured plan's prediction error, the calibration factors, the plan's fate."""
    errors = ", ".join(f"{label.removeprefix(SOLVER_LABEL)} {100 * (entry['predicted_ms'][label] / ms - 1):+.1f}%"
                       for label, ms in entry["measured_ms"].items())
    factors = ", ".join(f"{kind} x{factor:.2f}" for kind, factor in entry["calibration"].get("factors", {}).items())
    fate = f"{solver} chose another plan" if entry["plan_changed"] else "the plan stays"
    if entry.get("kept_replaced"):
        fate += (f", which ran {entry['side_by_side_ms']['new']:.4g} ms against the measured plan's "
                 f"{entry['side_by_side_ms']['replaced']:.4g} ms: the measured plan kept")
    return f"calibration round {entry['index']}: predicted vs measured {errors}; factors {factors or '-'}; {fate}"


def _plan_lines(s: dict[str, Any]) -> list[str]:
    """The plan's and each baseline's predicted and measured latency."""
    plan = "plan" if "solvers" not in s else f"plan ({s['solver']['solver']}, the lowest cost)"
    rows = [(plan, s["plan"])] + [(f"baseline {name}", result) for name, result in s["baselines"].items()]
    lines = []
    for label, result in rows:
        latency = result["latency"]
        speedup = f", plan speed-up {result['speedup']:.2f}x" if "speedup" in result else ""
        isolated = f" (isolated timings: {_ms(result['predicted_isolated_ms'])}{_window(result)})" \
            if "predicted_isolated_ms" in result else ""
        lines.append(f"{label}: predicted {_ms(result['predicted_ms'])}{isolated}, measured "
                     f"{_ms(latency['median_ms'])} median (spread {_ms(latency['spread_ms'])}){speedup}")
    return lines


def format_summary(summary: dict[str, Any]) -> list[str]:
    """The printed lines of a ``tune`` summary."""
    s, p, m = summary, summary["problem"], summary["measurements"]
    lines = [
        f"{s['model']} (input {_shapes(s['input_shapes'])}, {s['threads']} threads): {p['nodes']} nodes, "
        f"{p['edges']} edges, {p['candidates']} candidates",
        f"measurements: {m['tasks']} needed, {m['new']} new, {m['cached']} from the cache, {m['failed']} failed "
        f"({m['seconds']:.1f} s; cache {m.get('cache', '-')})" + _predicted_note(m),
        *(_solver_line(solver) for solver in s.get("solvers", {s["solver"]["solver"]: s["solver"]}).values()),
        *_plan_lines(s),
    ]
    load = s["load_average_1min"]
    latency = s["plan"]["latency"]
    pool = "" if latency["runtime_threads"] == latency["threads"] else \
        f" (TVM's thread pool ran {latency['runtime_threads']} threads: it was started before threads were set)"
    lines.append(f"end-to-end latency: {latency['rounds']} interleaved rounds per plan; 1-min load average "
                 f"{load['before_latency']:.2f} -> {load['after_latency']:.2f} on {usable_cores()} cores{pool}"
                 + (f"; cross-core wake-up {_wakeup_span(s['wakeup'])}" if "wakeup" in s else ""))
    for entry in s.get("calibration", {}).get("rounds", []):
        lines.append(_round_line(entry, s["solver"]["solver"]))
    if s.get("wakeup", {}).get("changed_since_calibration"):
        wakeup = s["wakeup"]
        lines.append(f"warning: one core woke another in {_wakeup_span(wakeup['calibration'])} in the timing that "
                     f"calibrated the costs and in {_wakeup_span(wakeup)} in the last one: the predictions carry a "
                     "change of the machine (virtual cores placed anew by their host, say; docs/fidelity.md)")
    if "budget" in s:
        b = s["budget"]
        lines.append(f"error budget {b['max_error']:g}: {len(b['checks'])} plans checked, {len(b['forbidden'])} "
                     "nodes limited in precision")
    if s.get("calibration", {}).get("skipped"):
        lines.append(f"calibration stopped: {s['calibration']['skipped']}")
    if s.get("drift", {}).get("disturbed"):
        lines.append(f"warning: the latencies above were timed while {s['drift']['kernels']} of the plans' kernels ran "
                     f"x{s['drift']['ratio']:.2f} their recorded time: the machine was disturbed; tune again later")
    if line := _moved_line(s):
        lines.append(line)
    if s.get("unsteady"):
        lines.append(f"warning: in the timing above, {unsteady_text(s['unsteady'])}: the machine changed speed while "
                     "it ran, and the measured medians, and so the predictions' errors, are that uncertain; tune again "
                     "later")
    extra = ", plans/" if "solvers" in s else ""
    bf16, int8 = s["plan"].get("bf16_nodes", []), s["plan"].get("int8_nodes", [])
    in_int8 = f", {len(int8)} in int8" if int8 else ""
    values = len(s["plan"].get("bf16_values", []))
    in_int8 += f"; {values} of them writing bf16 values" if values else ""
    share = f" ({len(bf16)} of {s['plan']['operators']} operators in bf16{in_int8})" \
        if p.get("precision", "fp32") != "fp32" else ""
    if "time" in s:
        lines.append(_time_line(s["time"]))
    lines.append(f"numerical check of the plan: relative error {s['plan']['relative_error']:.2g}{share}; wrote "
                 f"{Path(s['files']['plan']).parent}: plan.json, {PICTURE}, problem.json, summary.json, "
                 f"{TUNED_ARTIFACT}/{extra}")
    return lines
