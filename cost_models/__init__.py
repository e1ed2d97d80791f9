"""Kernel and layout-transform costs: what is measured (tasks), the persistent cache, the timer, and the providers
that price tasks for the problem builder."""

from cost_models.cache import DEFAULT_CACHE, CacheError, Context, CostCache, CostRecord, canonical
from cost_models.measure import CostProvider, MeasuredCosts, MeasureError, Progress, cpu_model
from cost_models.tasks import KernelTask, Task, TransformTask
from cost_models.timer import Timing, time_kernel
from cost_models.workers import Artifact, RunSettings, WorkerError

__all__ = [
    "DEFAULT_CACHE",
    "Artifact",
    "CacheError",
    "Context",
    "CostCache",
    "CostProvider",
    "CostRecord",
    "KernelTask",
    "MeasureError",
    "MeasuredCosts",
    "Progress",
    "RunSettings",
    "Task",
    "Timing",
    "TransformTask",
    "WorkerError",
    "canonical",
    "cpu_model",
    "time_kernel",
]
