"""The cost-provider conformance suite, shipped like ``solvers.checks``: what every ``CostProvider`` must do, whatever
prices the tasks.

``check_cost_provider(factory)`` runs every check and raises ``AssertionError`` naming the provider, the check and the
task at the first violation; ``cost_provider_checks(factory)`` yields the checks as ``(name, check)`` pairs for a test
runner. ``factory(directory)`` builds a fresh provider: ``directory`` is an empty scratch directory that each check
creates for its own provider (for a cost cache, say) and deletes after closing it.

The tasks are tiny (an 8x8 convolution in two layout pairs, two 16-channel transforms), so a provider that builds and
times them takes seconds, most of them starting its worker processes.

Examples
--------
>>> from cost_models.learned import PredictedCosts
>>> from cost_models.xgb_model import XGBCostModel
>>> model = XGBCostModel(n_estimators=2).fit([t.key for t in PRICED], [1.0, 2.0, 0.5, 0.7])
>>> check_cost_provider(lambda directory: PredictedCosts(model))
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models.cache import CostRecord, canonical
from cost_models.measure import CostProvider
from cost_models.tasks import KernelTask, TransformTask
from search.templates import Conv2DWorkload, Epilogue, KernelSpec

Factory = Callable[[Path], CostProvider]
"""Builds a fresh provider, given an empty scratch directory."""


@dataclass(frozen=True)
class UnbuildableTask:
    """A task that cannot be priced: its kind is unknown and ``primfunc`` raises. A provider must record it as a
    failure. Defined at module level so that spawned worker processes can unpickle it."""

    label: str = "conformance"

    @property
    def free(self) -> bool:
        return False

    @property
    def key(self) -> str:
        return canonical({"kind": "unbuildable", "label": self.label})

    def primfunc(self, target: Any) -> Any:
        raise NotImplementedError(f"a task of the unknown kind 'unbuildable' ({self.label}) cannot be built")


_CONV = Conv2DWorkload(1, 8, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1))
PRICED = (
    KernelTask(KernelSpec(_CONV, "NCHW8c", "NCHW16c", (), Epilogue())),
    KernelTask(KernelSpec(_CONV, "NCHW8c", "NCHW8c", (), Epilogue())),
    TransformTask((1, 16, 8, 8), "NCHW", "NCHW16c"),
    TransformTask((1, 16, 8, 8), "NCHW16c", "NHWC"),
)
"""Two kernels and two transforms a provider can price."""
FREE = (TransformTask((1, 16, 8, 8), "NHWC", "NHWC"), TransformTask((1, 8, 4, 4), "NCHW8c", "NCHW8c"))
"""Transforms between identical layouts: priced exactly 0 and never measured."""
UNBUILDABLE = UnbuildableTask()
MIXED = (PRICED[0], PRICED[2], FREE[0], UNBUILDABLE, PRICED[0], PRICED[3], FREE[0], PRICED[2], PRICED[1], UNBUILDABLE)
"""Kernels, transforms, a free transform and a task that cannot be built, with repeats."""


def _measure(provider: CostProvider, tasks: Sequence[Any]) -> list[CostRecord]:
    """``provider.measure(tasks)``, with an exception turned into a violation: failures must come back as records."""
    try:
        return provider.measure(list(tasks))
    except Exception as exc:
        raise AssertionError(f"measure raised {type(exc).__name__} instead of recording a failure: {exc}") from exc


def _task(task: Any) -> str:
    return task.key if len(task.key) <= 160 else task.key[:157] + "..."


# ---------------------------------------------------------------------------------------------------- checks
def check_records_in_order(provider: CostProvider) -> None:
    """One ``CostRecord`` per task, in the order given: equal records for equal tasks within a call, a measured time
    (finite, not negative) or an error message in each; the same in a second call with the tasks reversed."""
    for tasks in (MIXED, MIXED[::-1]):
        records = _measure(provider, tasks)
        if len(records) != len(tasks):
            raise AssertionError(f"{len(records)} records for {len(tasks)} tasks")
        first: dict[Any, CostRecord] = {}
        for position, (task, record) in enumerate(zip(tasks, records)):
            where = f"task {position} ({_task(task)})"
            if not isinstance(record, CostRecord):
                raise AssertionError(f"{where}: {record!r} is not a CostRecord")
            if record.ok and record.median_ms < 0:
                raise AssertionError(f"{where}: negative time {record.median_ms}")
            if not record.ok and not (isinstance(record.error, str) and record.error):
                raise AssertionError(f"{where}: a failed record without an error message: {record}")
            if first.setdefault(task, record) != record:
                raise AssertionError(f"{where}: {record} differs from the same task's earlier {first[task]}")


def check_free_transform(provider: CostProvider) -> None:
    """A transform between identical layouts costs exactly 0 and is not measured (no repeats)."""
    for task, record in zip(FREE * 2, _measure(provider, FREE * 2)):
        if not (record.ok and record.median_ms == 0.0 and record.repeats == 0):
            raise AssertionError(f"the free task {_task(task)} got {record}, not a time of exactly 0 with 0 repeats")


def check_failure_is_data(provider: CostProvider) -> None:
    """A task that cannot be built gets a failed record with the reason, and the tasks beside it are priced."""
    tasks = (UNBUILDABLE, PRICED[2], UNBUILDABLE)
    failed, priced, again = _measure(provider, tasks)
    if failed.ok or not failed.error:
        raise AssertionError(f"the unbuildable task {_task(UNBUILDABLE)} got {failed}, not a failure with a reason")
    if again != failed:
        raise AssertionError(f"the unbuildable task got two different records: {failed} and {again}")
    if not priced.ok or not math.isfinite(priced.median_ms):
        raise AssertionError(f"the task beside the failure, {_task(PRICED[2])}, got {priced}")


CHECKS: dict[str, Callable[[CostProvider], None]] = {
    "records_in_order": check_records_in_order,
    "free_transform": check_free_transform,
    "failure_is_data": check_failure_is_data,
}
"""Check name -> check, in the order ``check_cost_provider`` runs them."""


# ---------------------------------------------------------------------------------------------------- entry points
def cost_provider_checks(factory: Factory) -> Iterator[tuple[str, Callable[[], None]]]:
    """``(name, check)`` for every check of ``CHECKS``; calling ``check()`` builds a provider with ``factory`` in a
    fresh scratch directory, runs the check on it and closes it."""
    for name, check in CHECKS.items():
        yield name, functools.partial(_run, name, check, factory)


def _run(name: str, check: Callable[[CostProvider], None], factory: Factory) -> None:
    with tempfile.TemporaryDirectory(prefix="tessera-check-") as scratch, factory(Path(scratch)) as provider:
        try:
            check(provider)
        except AssertionError as exc:
            raise AssertionError(f"{type(provider).__name__}: {name}: {exc}") from exc


def check_cost_provider(factory: Factory) -> None:
    """Run every check of ``cost_provider_checks(factory)``; the first violation raises ``AssertionError`` naming
    the provider's class, the check and the task (``"MeasuredCosts: free_transform: the free task ..."``)."""
    for _, check in cost_provider_checks(factory):
        check()
