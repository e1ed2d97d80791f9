"""Each engine's latency on a quiet machine and beside background loads, timed in interleaved rounds.

Every contender runs in its own worker process (``experiments.peers.PeerWorker``: the network loaded once, its
threads fixed). A round visits every load (``experiments.background_load``), starting one load later each round;
under each load, after ``settle`` seconds, every contender is timed once (``experiments.peers.time_runner``: a warm-up
run, then runs for at least ``MIN_SECONDS``), starting one contender later each round, so that drift of a shared
machine hits all alike. The result per contender and load is the median of the rounds with quartiles and extremes,
the ratio of that median to the contender's quiet median, and the rounds' samples.

A shared machine moves between faster and slower states for seconds to minutes, so one contender's quiet and loaded
medians may come from different states. ``paired_table`` compares contenders where that cancels: per round and
load, a contender's time over a reference's time in the same load block (timed seconds apart), the median of those
over the rounds, and that median under each load over its median on the quiet machine: below 1, the contender kept
its speed better than the reference under that load. In brackets, that figure's 95% bootstrap interval over the
rounds: where it holds 1, the rounds do not tell the two apart under that load.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from experiments.background_load import BackgroundLoad
from experiments.peers import SETTLE_SECONDS, Contender, PeerWorker
from search.interleave import latency_summary

QUIET = "quiet"


def rotated(items: Sequence[Any], start: int) -> list[Any]:
    """``items`` starting at index ``start`` (modulo their number)."""
    start %= max(1, len(items))
    return [*items[start:], *items[:start]]


def interference(contenders: list[Contender], loads: Sequence[str], *, rounds: int, threads: int,
                 settle: float = 1.0, echo: Callable[[str], None] = lambda line: None
                 ) -> dict[str, dict[str, Any]]:
    """Per contender label: its engine facts and, per load, ``latency_summary`` of its round samples (ms) with
    ``ratio`` (median over the quiet median; ``loads`` must include ``QUIET``)."""
    if QUIET not in loads:
        raise ValueError(f"the loads must include {QUIET!r}: ratios are taken to it")
    workers: list[PeerWorker] = []
    try:
        for contender in contenders:
            echo(f"loading {contender.label} ({contender.engine})")
            workers.append(PeerWorker(contender, threads))
        samples = {w.contender.label: {load: [] for load in loads} for w in workers}
        for index in range(rounds):
            for load in rotated(loads, index):
                with BackgroundLoad(load) as running:
                    echo(f"round {index + 1}/{rounds}, load {load}" + (f" (pids {running.pids})" if running.pids
                                                                        else ""))
                    time.sleep(settle if running.pids else 0.0)
                    for worker in rotated(workers, index):
                        time.sleep(SETTLE_SECONDS)
                        samples[worker.contender.label][load].append(worker.time(None)["ms"])
                echo("  " + ", ".join(f"{label} {by_load[load][-1]:.2f}" for label, by_load in samples.items()))
        results = {}
        for worker in workers:
            by_load = {load: latency_summary(values) for load, values in samples[worker.contender.label].items()}
            for load, summary in by_load.items():
                summary["ratio"] = summary["median_ms"] / by_load[QUIET]["median_ms"]
                summary["samples_ms"] = samples[worker.contender.label][load]
            results[worker.contender.label] = {"engine": worker.contender.engine, "threads": threads,
                                               **worker.facts, "loads": by_load}
        return results
    finally:
        for worker in workers:
            worker.close()


def interference_table(results: dict[str, dict[str, Any]], loads: Sequence[str]) -> list[str]:
    """Markdown rows: per contender, the median (interquartile range) under each load and the loaded/quiet ratio."""
    header = ["contender", *(f"{load} ms" for load in loads), *(f"{load} / quiet" for load in loads if load != QUIET)]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for label, result in results.items():
        by_load = result["loads"]
        times = [f"{by_load[load]['median_ms']:.2f} ({by_load[load]['spread_ms']:.2f})" for load in loads]
        ratios = [f"{by_load[load]['ratio']:.2f}x" for load in loads if load != QUIET]
        lines.append("| " + " | ".join([label, *times, *ratios]) + " |")
    return lines


def paired_ratio(loaded: np.ndarray, quiet: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """The median of ``loaded`` (per-round ratios to the reference under a load) over the median of ``quiet`` (the
    same on the quiet machine), and its 95% percentile bootstrap interval (the rounds of each resampled apart)."""
    from scipy.stats import bootstrap

    def ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(a, axis=axis) / np.median(b, axis=axis)

    interval = bootstrap((loaded, quiet), ratio, method="percentile", n_resamples=2000,
                         rng=np.random.default_rng(seed)).confidence_interval
    return float(ratio(loaded, quiet)), float(interval.low), float(interval.high)


def paired_table(results: dict[str, dict[str, Any]], loads: Sequence[str], reference: str) -> list[str]:
    """Markdown rows: per contender other than ``reference``, the median over rounds of its time over the
    reference's in the same load block, per load, and each loaded one over the quiet one with its bootstrap interval
    (``paired_ratio``; see the module docstring); no rows if the reference was not timed."""
    if reference not in results:
        return []
    base = results[reference]["loads"]
    header = ["contender", *(f"{load}: / {reference}" for load in loads),
              *(f"{load} / quiet, against {reference}" for load in loads if load != QUIET)]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for label, result in results.items():
        if label == reference:
            continue
        relative = {load: np.asarray(result["loads"][load]["samples_ms"]) / np.asarray(base[load]["samples_ms"])
                    for load in loads}
        against = [paired_ratio(relative[load], relative[QUIET]) for load in loads if load != QUIET]
        lines.append("| " + " | ".join([label, *(f"{np.median(relative[load]):.3f}" for load in loads),
                                        *(f"{ratio:.2f}x ({low:.2f}-{high:.2f})" for ratio, low, high in against)])
                     + " |")
    return lines
