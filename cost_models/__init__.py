"""Kernel and layout-transform costs: what is measured (tasks), the persistent cache, the timer, the providers that
price tasks for the problem builder, and the cost sources that open them.

The names below are imported on first use, so that importing a light module of the package (``cost_models.sources``,
which the command line reads to build its options) does not import TVM.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_CACHE": "cost_models.cache",
    "CacheError": "cost_models.cache",
    "Context": "cost_models.cache",
    "CostCache": "cost_models.cache",
    "CostRecord": "cost_models.cache",
    "canonical": "cost_models.cache",
    "CostSourceError": "cost_models.errors",
    "CostProvider": "cost_models.measure",
    "MeasuredCosts": "cost_models.measure",
    "MeasureError": "cost_models.measure",
    "Progress": "cost_models.measure",
    "COST_SOURCES": "cost_models.sources",
    "CostSource": "cost_models.sources",
    "cost_source": "cost_models.sources",
    "KernelTask": "cost_models.tasks",
    "Task": "cost_models.tasks",
    "TransformTask": "cost_models.tasks",
    "Timing": "cost_models.timer",
    "time_kernel": "cost_models.timer",
    "Artifact": "cost_models.workers",
    "RunSettings": "cost_models.workers",
    "WorkerError": "cost_models.workers",
}
"""Exported name -> the module defining it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'cost_models' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
