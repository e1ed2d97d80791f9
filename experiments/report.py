"""``tessera report``: read an experiment's trial runs back from MLflow and write tables and plots.

The store must exist (``sqlite:///missing.db`` is an error, never a new empty database) and hold the experiment.

Per instance and solver (repeats pooled: median cost and median solve seconds) the tables give the cost, the solver's
own bound, the gap to the instance's best lower bound (the LP bound, any proven bound, any proven optimum), the cost
relative to the cheapest solution and the time, in ``report.md`` (the ``experiments.compare`` table) and
``report.csv`` (with ``cost_ratio`` = cost / best lower bound and the graph size). Plots: ``cost_ratio.png`` (cost /
best lower bound per solver per instance) and ``solve_time.png`` (solve seconds against the number of nodes). Trials
with ``latency`` metrics add a ``latency_ms`` column (median over repeats), a table of each plan next to the uniform
baselines, and two plots: ``latency.png`` (plans and baselines per instance) and ``predicted_vs_measured.png``.
"""

from __future__ import annotations

import csv
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from experiments.compare import LEGEND, LP_BOUND, Row, format_table
from experiments.config import ExperimentError
from experiments.tracking import ERROR_TAG, STATUS, TRIAL_ID, trial_runs
from experiments.trials import ERROR
from solvers.base import relative_gap

ERROR_CHARS = 100
"""Error messages are cut to this length in the tables (the full text is the run's ``tessera.error`` tag)."""


@dataclass(frozen=True)
class Entry:
    """One table line: a ``compare.Row`` plus the instance's size, best bound and the number of pooled runs."""

    row: Row
    nodes: int
    edges: int
    best_bound: float | None
    runs: int
    latency_ms: float | None = None
    """Median end-to-end latency of the exported plans (``latency`` metrics), None when not measured."""
    baselines_ms: dict[str, float] | None = None
    """Median latency of each uniform baseline, timed in the same rounds as the plans."""

    @property
    def cost_ratio(self) -> float | None:
        if self.row.cost is None or not self.best_bound:
            return None
        return self.row.cost / self.best_bound


def entries(experiment: str, tracking_uri: str | None = None) -> list[Entry]:
    """Table lines of ``experiment``, instances and solvers in the order the trials were first run."""
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for run in trial_runs(experiment, tracking_uri):
        instance = run.data.params["instance"]
        trial_id = run.data.tags[TRIAL_ID]
        groups[instance, trial_id[len(instance) + 1:trial_id.rfind("/r")]].append(run)
    if not groups:
        raise ExperimentError(f"experiment {experiment!r} has no trial runs")
    order = sorted(groups, key=lambda key: (_natural(key[0]), key[1] != LP_BOUND, key[1]))
    rows = {key: _row(*key, groups[key]) for key in order}
    out = []
    for (instance, _), row in rows.items():
        same = [r for (i, _), r in rows.items() if i == instance]
        bound = max((r.bound for r in same if r.bound is not None), default=None)
        cheapest = min((r.cost for r in same if r.cost is not None), default=None)
        row = replace(
            row,
            gap=None if row.cost is None or bound is None else relative_gap(row.cost, bound),
            vs_best=None if row.cost is None or not cheapest else (row.cost - cheapest) / cheapest,
        )
        runs = groups[instance, row.solver]
        metrics = runs[0].data.metrics
        latencies = [r.data.metrics["latency_ms"] for r in runs if "latency_ms" in r.data.metrics]
        baselines = {key[len("baseline_"):-len("_ms")]: statistics.median(
            r.data.metrics[key] for r in runs if key in r.data.metrics)
            for key in dict.fromkeys(k for r in runs for k in r.data.metrics if k.startswith("baseline_"))}
        out.append(Entry(row, int(metrics.get("nodes", 0)), int(metrics.get("edges", 0)), bound, len(runs),
                         statistics.median(latencies) if latencies else None, baselines or None))
    return out


def _natural(label: str) -> list[Any]:
    """Sort key that orders ``s2`` before ``s10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label)]


def _row(instance: str, solver: str, runs: list[Any]) -> Row:
    costs = [r.data.metrics["cost"] for r in runs if "cost" in r.data.metrics]
    bounds = [r.data.metrics["lower_bound"] for r in runs if "lower_bound" in r.data.metrics]
    seconds = [r.data.metrics.get("solve_seconds", 0.0) for r in runs]
    statuses = [_status(r) for r in runs]
    status = max(set(statuses), key=statuses.count)
    if status == ERROR:
        message = runs[-1].data.tags.get(ERROR_TAG, "")
        status = f"error: {message if len(message) <= ERROR_CHARS else message[:ERROR_CHARS] + '...'}"
    return Row(instance, solver, statistics.median(costs) if costs else None, max(bounds) if bounds else None,
               statistics.median(seconds), status)


def _status(run: Any) -> str:
    """A trial run's status: its tag (a store written before the status was a tag has it as a param)."""
    return run.data.tags.get(STATUS) or run.data.params.get("status", ERROR)


def write_report(experiment: str, out: str | Path, tracking_uri: str | None = None) -> list[Path]:
    """Write ``report.md``, ``report.csv``, ``cost_ratio.png`` and ``solve_time.png`` into ``out``; return them."""
    table = entries(experiment, tracking_uri)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "report.md", out / "report.csv", out / "cost_ratio.png", out / "solve_time.png"]
    runs = sum(e.runs for e in table)
    files[0].write_text(
        f"# {experiment}\n\n{runs} trial runs; median cost and median solve seconds over repeats.\n\n"
        f"{format_table([e.row for e in table], markdown=True)}\n\n{LEGEND}\n\n{_latency_table(table)}"
        f"![cost / best lower bound]({files[2].name})\n\n![solve time against graph size]({files[3].name})\n"
    )
    _write_csv(files[1], table)
    _plot_cost_ratio(files[2], table)
    _plot_solve_time(files[3], table)
    if any(e.latency_ms is not None for e in table):
        files += [out / "latency.png", out / "predicted_vs_measured.png"]
        _plot_latency(files[4], table)
        _plot_predicted(files[5], table)
        with files[0].open("a") as handle:
            handle.write(f"![end-to-end latency per plan and baseline]({files[4].name})\n\n"
                         f"![predicted against measured latency]({files[5].name})\n")
    return files


def _latency_table(table: list[Entry]) -> str:
    """Markdown table of predicted cost against measured end-to-end latency, empty when nothing was timed."""
    timed = [e for e in table if e.latency_ms is not None]
    if not timed:
        return ""
    names = list(dict.fromkeys(name for e in timed for name in e.baselines_ms or {}))
    lines = ["| instance | solver | predicted cost | latency (ms, median) | "
             + "".join(f"{name} (ms) | " for name in names) + "speed-up over the best baseline |",
             "|---|---|---:|---:|" + "---:|" * (len(names) + 1)]
    for e in timed:
        base = e.baselines_ms or {}
        best = min(base.values(), default=None)
        cells = "".join(f"{base[n]:.4g} | " if n in base else "- | " for n in names)
        speedup = "-" if best is None else f"{best / e.latency_ms:.2f}x"
        lines.append(f"| {e.row.instance} | {e.row.solver} | {e.row.cost:.4g} | {e.latency_ms:.4g} | {cells}"
                     f"{speedup} |")
    return ("End-to-end latency of the exported plans next to the uniform baselines timed in the same rounds (model "
            "instances; costs in the problem's unit):\n\n" + "\n".join(lines) + "\n\n")


def _write_csv(path: Path, table: list[Entry]) -> None:
    names = list(dict.fromkeys(name for e in table for name in e.baselines_ms or {}))
    columns = ["instance", "nodes", "edges", "solver", "runs", "cost", "bound", "best_bound", "cost_ratio", "gap",
               "vs_best", "seconds", "latency_ms", "status", *(f"baseline_{name}_ms" for name in names)]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for e in table:
            r = e.row
            writer.writerow([r.instance, e.nodes, e.edges, r.solver, e.runs, r.cost, r.bound, e.best_bound,
                             e.cost_ratio, r.gap, r.vs_best, f"{r.seconds:.6f}", e.latency_ms, r.status,
                             *((e.baselines_ms or {}).get(name) for name in names)])


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_cost_ratio(path: Path, table: list[Entry]) -> None:
    plt = _pyplot()
    solved = [e for e in table if e.row.solver != LP_BOUND]
    instances = list(dict.fromkeys(e.row.instance for e in solved))
    solvers = list(dict.fromkeys(e.row.solver for e in solved))
    ratio = {(e.row.instance, e.row.solver): e.cost_ratio for e in solved}
    width = 0.8 / max(len(solvers), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(instances)), 4.0))
    for n, solver in enumerate(solvers):
        xs = [i + n * width for i, inst in enumerate(instances) if ratio.get((inst, solver)) is not None]
        ys = [ratio[inst, solver] for inst in instances if ratio.get((inst, solver)) is not None]
        ax.bar(xs, ys, width, label=solver)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(instances))], instances, rotation=30, ha="right")
    ax.set_ylabel("cost / best lower bound")
    ratios = [v for v in ratio.values() if v is not None]
    if ratios:
        ax.set_ylim(min(0.99, min(ratios) - 0.01), max(ratios) + 0.01)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_solve_time(path: Path, table: list[Entry]) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for solver in dict.fromkeys(e.row.solver for e in table):
        points = [(e.nodes, e.row.seconds) for e in table
                  if e.row.solver == solver and (e.row.cost is not None or e.row.status == "bound")]
        ax.scatter([p[0] for p in points], [p[1] for p in points], label=solver)
    ax.set_xlabel("nodes")
    ax.set_ylabel("solve seconds (median over repeats)")
    ax.set_yscale("log")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_latency(path: Path, table: list[Entry]) -> None:
    """Per model instance: each solver's plan and each baseline, median end-to-end latency."""
    plt = _pyplot()
    timed = [e for e in table if e.latency_ms is not None]
    instances = list(dict.fromkeys(e.row.instance for e in timed))
    fig, axes = plt.subplots(1, len(instances), figsize=(max(6.0, 4.0 * len(instances)), 4.0), squeeze=False)
    for ax, instance in zip(axes[0], instances):
        here = [e for e in timed if e.row.instance == instance]
        baselines: dict[str, list[float]] = defaultdict(list)
        for e in here:
            for name, ms in (e.baselines_ms or {}).items():
                baselines[name].append(ms)
        labels = [e.row.solver for e in here] + list(baselines)
        values = [e.latency_ms for e in here] + [statistics.median(v) for v in baselines.values()]
        ax.bar(range(len(labels)), values, color=["C0"] * len(here) + ["C7"] * len(baselines))
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.set_title(instance, fontsize="small")
        ax.set_ylabel("end-to-end latency (ms, median)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_predicted(path: Path, table: list[Entry]) -> None:
    """Predicted plan cost against measured latency, with the line where they agree."""
    plt = _pyplot()
    timed = [e for e in table if e.latency_ms is not None and e.row.cost is not None]
    fig, ax = plt.subplots(figsize=(5.0, 5.0))
    for solver in dict.fromkeys(e.row.solver for e in timed):
        points = [(e.row.cost, e.latency_ms) for e in timed if e.row.solver == solver]
        ax.scatter([p[0] for p in points], [p[1] for p in points], label=solver)
    top = max((max(e.row.cost, e.latency_ms) for e in timed), default=1.0) * 1.1
    ax.plot([0, top], [0, top], color="black", linewidth=0.8)
    ax.set_xlabel("predicted plan cost (ms)")
    ax.set_ylabel("measured latency (ms, median)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def replace_section(path: Path, marker: str, lines: list[str], title: str) -> None:
    """Put ``lines`` between two ``marker`` lines in the markdown file ``path``, replacing what was there (or
    appending, creating the file with ``title`` if missing), so that several scripts can share one results file."""
    section = "\n".join([marker, *lines, marker])
    text = path.read_text() if path.is_file() else f"# {title}\n"
    if text.count(marker) == 2:
        head, _, rest = text.partition(marker)
        text = head + section + rest.partition(marker)[2]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)
