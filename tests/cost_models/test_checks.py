"""The shipped cost-provider conformance suite (``cost_models.checks``) over the provider of every registered cost
source, and the suite itself: a correct toy provider passes, broken ones fail."""

from __future__ import annotations

import doctest
import itertools
from collections.abc import Sequence

import pytest

from cost_models import checks
from cost_models.cache import CostRecord
from cost_models.checks import CHECKS, PRICED, check_cost_provider, cost_provider_checks
from cost_models.measure import CostProvider
from cost_models.sources import COST_SOURCES, cost_source
from cost_models.tasks import FREE, KernelTask, TransformTask
from cost_models.xgb_model import XGBCostModel
from tests.cost_models.test_measure import TARGET, THREADS


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A tiny regression model trained on made-up times of the suite's own tasks."""
    path = tmp_path_factory.mktemp("model") / "model.json"
    return XGBCostModel(n_estimators=5).fit([task.key for task in PRICED], [1.0, 2.0, 0.5, 0.7]).save(path)


@pytest.mark.parametrize("source, check", list(itertools.product(COST_SOURCES, CHECKS)))
def test_every_cost_source_conforms(source, check, model_file):
    params = {"model": model_file} if "model" in COST_SOURCES[source].parameters() else {}
    opened = cost_source(source, **params)
    dict(cost_provider_checks(lambda scratch: opened.open(scratch / "costs.sqlite", TARGET, THREADS, None)))[check]()


class Toy(CostProvider):
    """Correct without building anything: 1 ms per kernel, 0.5 ms per transform, a failure for any other task."""

    def measure(self, tasks: Sequence) -> list[CostRecord]:
        known: dict[str, CostRecord] = {}
        return [FREE if task.free else known.setdefault(task.key, self._price(task)) for task in tasks]

    @staticmethod
    def _price(task) -> CostRecord:
        if isinstance(task, KernelTask):
            return CostRecord(1.0, 0.0, 1)
        if isinstance(task, TransformTask):
            return CostRecord(0.5, 0.0, 1)
        return CostRecord.failed(f"cannot price {type(task).__name__}")


class Reversed(Toy):
    def measure(self, tasks: Sequence) -> list[CostRecord]:
        return super().measure(tasks)[::-1]


class DropsFree(Toy):
    def measure(self, tasks: Sequence) -> list[CostRecord]:
        return [record for task, record in zip(tasks, super().measure(tasks)) if not task.free]


class MeasuresFree(Toy):
    def measure(self, tasks: Sequence) -> list[CostRecord]:
        records = super().measure(tasks)
        return [CostRecord(0.01, 0.0, 3) if task.free else record for task, record in zip(tasks, records)]


class Raises(Toy):
    @staticmethod
    def _price(task) -> CostRecord:
        if not isinstance(task, KernelTask | TransformTask):
            raise ValueError(f"unknown task {task.key}")
        return Toy._price(task)


def test_a_correct_provider_passes_and_the_examples_run():
    check_cost_provider(lambda scratch: Toy())
    assert doctest.testmod(checks).failed == 0


@pytest.mark.parametrize(
    "broken, message",
    [
        (Reversed, r"Reversed: records_in_order: task \d+ \(.*\): .* differs from the same task's earlier"),
        (DropsFree, r"DropsFree: records_in_order: 8 records for 10 tasks"),
        (MeasuresFree, r"MeasuresFree: free_transform: the free task .* not a time of exactly 0 with 0 repeats"),
        (Raises, r"Raises: records_in_order: measure raised ValueError instead of recording a failure"),
    ],
    ids=["wrong-order", "drops-free", "measures-free", "raises"],
)
def test_the_suite_catches_broken_providers(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_cost_provider(lambda scratch: broken())
