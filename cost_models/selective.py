"""Selective measurement: measure only the tasks that can change the plan, bound the others.

``SelectiveCosts`` prices a task by what is known of it on this machine (the cost cache's record, or what it measured
itself) and, where nothing is, by a lower bound: a regression cost model's prediction (refit on what is known, once
that has grown by ``REFIT_GROWTH``: ``BOOST_ROUNDS`` trees boosted on it) times the ``QUANTILE`` of measured over
predicted time among the tasks measured so far. ``price_selectively`` decides what to measure: first, in every group
of tasks (a node's candidates: ``features.group_key``), the ``INITIAL`` best predicted and those predicted within
``MARGIN`` of the group's best, and every task the model cannot featurise (a kind without features); then it solves
the problem so priced, measures the tasks the solution's plan uses that are not known yet (its kernels, chains and
layout transforms), and solves again, until the plan's tasks are all measured. The problem it returns prices that
plan by measurements alone and every task never measured by its bound (counted as ``predicted`` in the source's
stats).

The loop ends, since each round measures at least one of finitely many tasks. Where the bounds hold, its plan is the
one full measurement finds: every other plan costs at least its bounded cost, which is at least the plan's measured
cost. A bound fails for about one task in twenty (the quantile), and only a failed bound on a candidate that would
have won changes the plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from cost_models.cache import CostRecord
from cost_models.features import group_key, parse_key
from cost_models.learned import featurisable, predicted_record, require_times
from cost_models.measure import CostProvider, MeasuredCosts
from cost_models.pricing import build_problem, measurement_tasks
from cost_models.tasks import FREE, Task
from cost_models.xgb_model import XGBCostModel
from search.candidates import Candidate
from search.graph import OpGraph
from solvers.problem import Problem

INITIAL = 2
"""Best-predicted tasks of every group measured before the first solve."""
MARGIN = 0.2
"""Tasks predicted within this share of their group's best predicted time are measured before the first solve too.
Replayed on nine networks' full measurements (``benchmarks/selective_replay.py``, one AVX2 host): 0.2 measured 62% of
their tasks and ended within 0.2% of the optimum on all, 0.1 measured 49% and ended 1.9% off on inception_v3."""
QUANTILE = 0.05
"""The quantile of measured over predicted time that makes a prediction a lower bound (one in twenty measured tasks
ran faster than so bounded)."""
MIN_RATIOS = 20
"""Measured tasks of a kind that give it its own bound factor."""
REFIT_GROWTH = 0.25
"""The model is refit on what is known once that has grown by this share since its last fit."""
BOOST_ROUNDS = 50
"""Trees a refit boosts on what is known, on top of the model's own (``XGBCostModel.boosted``): a fraction of a second,
where retraining on the shipped model's data too took seconds a refit."""


def key_kind(key: str) -> str:
    """What a task's bound factor is shared by: its key's kind (a kernel kind, ``layout_transform`` or ``chain``)."""
    return parse_key(key)["kind"]


class SelectiveCosts(CostProvider):
    """Known records (the cache's for this machine, and those measured through ``measure_unknown``) where there are;
    elsewhere a lower bound: ``model``'s prediction, refit on the known records of the tasks asked for, times the
    ``quantile`` of measured over predicted time among the tasks of its kind measured so far (predicted before they
    were measured). ``measure`` never measures."""

    def __init__(self, measured: MeasuredCosts, model: XGBCostModel, *, quantile: float = QUANTILE) -> None:
        if not 0 < quantile < 1:
            raise ValueError(f"the bound's quantile is between 0 and 1, got {quantile}")
        self.measured, self.model, self.quantile = measured, require_times(model), quantile
        self.known: dict[str, CostRecord] = {}
        self.ratios: dict[str, list[float]] = defaultdict(list)
        self.stats: dict[str, Any] = {}
        self._new = self._cached = 0
        self._fitted: XGBCostModel | None = None
        self._fitted_on = -1

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        by_key = {task.key: task for task in tasks if not task.free}
        usable, failed = featurisable(list(by_key))
        unknown = self.unknown(usable)
        factors = self.bound_factors()
        bounds = [ms * factors.get(key_kind(key), factors[""]) for key, ms in zip(unknown, self.predict(unknown))]
        records = {**failed, **self.known, **dict(zip(unknown, map(predicted_record, bounds)))}
        self.stats = {"source": "selective", "tasks": len(by_key), "measured": self._new, "cached": self._cached,
                      "predicted": len(unknown), "bound_factors": {k or "all": round(v, 4) for k, v in factors.items()}}
        return [FREE if task.free else records[task.key] for task in tasks]

    def predict(self, keys: Sequence[str]) -> list[float]:
        """Predicted milliseconds of ``keys``, by the model boosted on the successful records known (once they have
        grown by ``REFIT_GROWTH`` since the last fit)."""
        if not keys:
            return []
        ok = {key: record.median_ms for key, record in self.known.items() if record.ok}
        if self._fitted is None or len(ok) >= (1 + REFIT_GROWTH) * max(self._fitted_on, 1):
            self._fitted = self.model.boosted(list(ok), list(ok.values()), BOOST_ROUNDS) if ok else self.model
            self._fitted_on = len(ok)
        return [float(ms) for ms in self._fitted.predict(list(keys))]

    def bound_factors(self) -> dict[str, float]:
        """Per task kind (``""``: all kinds, for a kind with fewer than ``MIN_RATIOS``), the factor that turns a
        prediction into a lower bound: the ``quantile`` of measured over predicted time; 1 before any."""
        every = [ratio for ratios in self.ratios.values() for ratio in ratios]
        factors = {"": float(np.quantile(every, self.quantile)) if every else 1.0}
        factors |= {kind: float(np.quantile(ratios, self.quantile)) for kind, ratios in self.ratios.items()
                    if len(ratios) >= MIN_RATIOS}
        return factors

    def measure_unknown(self, tasks: Sequence[Task]) -> int:
        """Measure those of ``tasks`` that nothing is known of yet (the cache keeps them), each predicted first to
        learn how far predictions miss; how many."""
        self.unknown([task.key for task in tasks if not task.free])
        todo = list(dict.fromkeys(task for task in tasks if not task.free and task.key not in self.known))
        if not todo:
            return 0
        self._learn(dict(zip((task.key for task in todo), self.measured.measure(todo))))
        self._new += len(todo)
        return len(todo)

    def unknown(self, keys: Sequence[str]) -> list[str]:
        """Those of ``keys`` nothing is known of, once the cache's records of the others are read into ``known`` (each
        predicted first, as a measured one is)."""
        fresh = [key for key in keys if key not in self.known]
        cached = self.measured.cache.get_many(self.measured.context, fresh)
        self._learn(cached)
        self._cached += len(cached)
        return [key for key in fresh if key not in cached]

    def _learn(self, records: Mapping[str, CostRecord]) -> None:
        """Add ``records`` to ``known``, with the ratio of each successful one's time to its prediction by the model
        as fitted before it was known."""
        usable, _ = featurisable([key for key, record in records.items() if record.ok])
        for key, ms in zip(usable, self.predict(usable)):
            if ms > 0:
                self.ratios[key_kind(key)].append(records[key].median_ms / ms)
        self.known.update(records)

    def spent(self) -> dict[str, float]:
        return self.measured.spent()

    def close(self) -> None:
        self.measured.close()


def initial_picks(provider: SelectiveCosts, tasks: Sequence[Task], *, initial: int = INITIAL,
                  margin: float = MARGIN) -> list[Task]:
    """The unknown ``tasks`` to measure before the first solve: per group, the ``initial`` best predicted and every
    one predicted within ``margin`` of the group's best; and every one the model cannot featurise (a kind without
    features is measured, not left out)."""
    by_key = {task.key: task for task in tasks if not task.free}
    usable, unpredictable = featurisable(list(by_key))
    unknown = provider.unknown(usable)
    groups: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for key, ms in zip(unknown, provider.predict(unknown)):
        groups[group_key(key)].append((ms, key))
    picks = []
    for members in groups.values():
        members.sort()
        best = members[0][0]
        picks += [by_key[key] for rank, (ms, key) in enumerate(members) if rank < initial or ms <= best * (1 + margin)]
    return picks + [by_key[key] for key in provider.unknown(list(unpredictable))]


def plan_tasks(graph: OpGraph, space: Mapping[str, Sequence[Candidate]], assignment: Mapping[str, str], *,
               shared: bool = True, chains: bool = True) -> list[Task]:
    """The tasks that price the plan ``assignment`` chooses (node -> candidate name; other nodes ignored): those of
    the space holding only its candidates."""
    chosen = {node: [c for c in candidates if c.name == assignment[node]] for node, candidates in space.items()}
    return measurement_tasks(graph, chosen, shared=shared, chains=chains)


def price_selectively(provider: SelectiveCosts, graph: OpGraph, space: Mapping[str, Sequence[Candidate]],
                      measure: Callable[[list[Task]], Sequence[CostRecord]], *, solver: str = "auto",
                      picks: bool = True, initial: int = INITIAL, margin: float = MARGIN, shared: bool = True,
                      chains: bool = True, **problem_args: Any) -> Problem:
    """The problem of ``space`` priced by ``measure`` (``provider.measure``, perhaps counted) once ``provider`` has
    measured the initial picks (``initial_picks`` with ``initial`` and ``margin``; none if ``picks`` is False: a space
    priced selectively before, whose picks the cache holds) and every task of the plan ``solver`` finds on it (see the
    module docstring); ``provider.stats["rounds"]`` counts the solves."""
    from solvers import solve

    if picks:
        tasks = measurement_tasks(graph, space, shared=shared, chains=chains)
        provider.measure_unknown(initial_picks(provider, tasks, initial=initial, margin=margin))
    rounds = 0
    while True:
        problem = build_problem(graph, space, measure, shared=shared, chains=chains, **problem_args)
        rounds += 1
        assignment = solve(problem, solver).assignment
        if not provider.measure_unknown(plan_tasks(graph, space, assignment, shared=shared, chains=chains)):
            provider.stats["rounds"] = rounds
            return problem
