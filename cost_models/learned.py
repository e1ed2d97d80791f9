"""Cost providers backed by the learned model: ``PredictedCosts`` predicts every task, ``HybridCosts`` measures only
the best-predicted fraction of each node's candidates and predicts the rest.

Both take a regression ``XGBCostModel``. Tasks are grouped as a node's candidates are (``features.group_key``: a
kernel's workload and epilogue, a transform's tensor shape), so "the best-predicted 20%" means 20% of every group. A
task the model cannot featurise (an unknown kind, a malformed key) gets a failed record saying why, as a measurement
that fails does: its candidate is forbidden and the others are priced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cost_models.cache import CostRecord
from cost_models.features import FeatureError, feature_row, group_key
from cost_models.measure import CostProvider, MeasuredCosts
from cost_models.tasks import FREE, Task
from cost_models.xgb_model import ModelError, XGBCostModel


def require_times(model: XGBCostModel) -> XGBCostModel:
    """``model`` if it predicts times, else ``ModelError``."""
    if not model.predicts_times:
        raise ModelError(f"a {model.objective} model orders candidates but does not predict times, so it cannot "
                         "price a problem; train one with objective 'regression'")
    return model


def predicted_record(ms: float) -> CostRecord:
    """A prediction as a cost record."""
    return CostRecord(float(ms), None, 0)  # repeats = 0: a prediction, not a measurement


def featurisable(keys: Sequence[str]) -> tuple[list[str], dict[str, CostRecord]]:
    """The keys the model can featurise, and a failed record for each of the others naming why."""
    usable, failed = [], {}
    for key in keys:
        try:
            feature_row(key)
        except FeatureError as exc:
            failed[key] = CostRecord.failed(f"the cost model cannot price this task: {exc}")
        else:
            usable.append(key)
    return usable, failed


def check_fraction(fraction: float) -> float:
    """``fraction`` as a float if it is in (0, 1], else ``ModelError``."""
    if not (isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and 0 < fraction <= 1):
        raise ModelError(f"the measured fraction must be in (0, 1], got {fraction!r}")
    return float(fraction)


def check_rounds(rounds: int) -> int:
    """``rounds`` if it is a positive integer, else ``ModelError``."""
    if not (isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 1):
        raise ModelError(f"rounds must be a positive integer, got {rounds!r}")
    return rounds


class PredictedCosts(CostProvider):
    """Price every task with the model's prediction; nothing is built or timed."""

    def __init__(self, model: XGBCostModel) -> None:
        self.model = require_times(model)
        self.stats: dict[str, Any] = {}

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        keys = [None if task.free else task.key for task in tasks]
        distinct = list(dict.fromkeys(key for key in keys if key is not None))
        usable, records = featurisable(distinct)
        records.update(zip(usable, map(predicted_record, self.model.predict(usable))))
        self.stats = {"source": "xgboost", "tasks": len(distinct), "measured": 0, "predicted": len(usable)}
        return [FREE if key is None else records[key] for key in keys]


class HybridCosts(CostProvider):
    """Predict, measure the best-predicted ``fraction`` of every group, refit, repeat for ``rounds`` rounds.

    After round ``r`` each group of ``n`` candidates has at least ``ceil(fraction * n * r / rounds)`` known ones
    (cached records count), chosen among the unknown ones by the current model's prediction; the model is refit on
    what is known after every round, and the tasks still unknown at the end are priced by that last model. Measured
    failures forbid their candidates as with ``MeasuredCosts``.

    Parameters
    ----------
    measured : MeasuredCosts
        Measures (and caches) the chosen tasks; its cache also supplies what is already known.
    model : XGBCostModel
        A regression model, refit with every round's measurements (the file it came from is not changed).
    fraction : float
        Share of each group to measure, in (0, 1].
    rounds : int
        Predict-measure-refit rounds.
    """

    def __init__(self, measured: MeasuredCosts, model: XGBCostModel, *, fraction: float = 0.2, rounds: int = 2) -> None:
        self.measured, self.model = measured, require_times(model)
        self.fraction, self.rounds = check_fraction(fraction), check_rounds(rounds)
        self.stats: dict[str, Any] = {}

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        by_key = {task.key: task for task in tasks if not task.free}
        usable, failed = featurisable(list(by_key))
        groups: dict[str, list[str]] = {}
        for key in usable:
            groups.setdefault(group_key(key), []).append(key)
        known = self.measured.cache.get_many(self.measured.context, usable)
        cached, new = len(known), 0
        model = self.model
        for round_ in range(1, self.rounds + 1):
            picks = self._picks(groups, known, model, round_)
            if picks:
                known.update(zip(picks, self.measured.measure([by_key[key] for key in picks])))
                new += len(picks)
            ok = {key: record.median_ms for key, record in known.items() if record.ok}
            if ok:
                model = model.refit(list(ok), list(ok.values()), note=f"hybrid round {round_}: {len(ok)} known")
        unknown = [key for key in usable if key not in known]
        records = {**failed, **known, **dict(zip(unknown, map(predicted_record, model.predict(unknown))))}
        self.model = model
        self.stats = {"source": "hybrid", "tasks": len(by_key), "measured": new, "cached": cached,
                      "predicted": len(unknown), "fraction": self.fraction, "rounds": self.rounds}
        return [FREE if task.free else records[task.key] for task in tasks]

    def _picks(self, groups: dict[str, list[str]], known: dict[str, CostRecord], model: XGBCostModel,
               round_: int) -> list[str]:
        """The unknown keys to measure this round: per group, the best-predicted ones up to its quota."""
        unknown = [key for members in groups.values() for key in members if key not in known]
        predicted = dict(zip(unknown, model.predict(unknown)))
        picks = []
        for members in groups.values():
            quota = math.ceil(self.fraction * len(members) * round_ / self.rounds)
            missing = quota - sum(key in known for key in members)
            ranked = sorted((key for key in members if key not in known), key=predicted.__getitem__)
            picks += ranked[: max(missing, 0)]
        return picks

    def spent(self) -> dict[str, float]:
        return self.measured.spent()

    def close(self) -> None:
        self.measured.close()
