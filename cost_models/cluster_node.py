"""What runs on each node of a measuring cluster: ``NodeMeasurer``, the Ray actor through which ``ClusterCosts``
(``cost_models.cluster_costs``) measures there.

The actor says what its timings would be keyed by (its ``NodeInfo``: this node's CPU model and versions) and measures
batches exactly as ``MeasuredCosts`` does on one machine (``cost_models.measure.LocalMeasurer``: builder processes on
the node's CPUs, then one runner process timing one task at a time with ``TVM_NUM_THREADS`` fixed), yielding each
record as it is known; it writes no cache. Its worker processes end with it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cost_models.cache import Context, CostRecord
from cost_models.measure import LocalMeasurer, machine_context
from cost_models.tasks import Task
from cost_models.workers import RunSettings


@dataclass(frozen=True)
class NodeInfo:
    """A node as its actor sees it: the context its timings are keyed by, and the cores this process may use."""

    context: Context
    cores: int


class NodeMeasurer:
    """Measures batches of tasks on its node for the driver: ``builders`` processes build a batch for ``target`` in
    parallel, then one runner process times it with ``settings`` (see ``LocalMeasurer``); ``measure`` is a generator,
    so the driver receives every record the moment it is known.

    The processes and their build directory exist from the first batch to ``close``. Run the actor with a second
    thread (``max_concurrency=2``) so that ``close`` can stop a batch in progress.
    """

    def __init__(self, target: str, settings: RunSettings, *, builders: int, build_timeout: float,
                 run_timeout: float, f_build: str, f_run: str) -> None:
        cores = len(os.sched_getaffinity(0))
        self.info = NodeInfo(machine_context(target, settings.threads, settings.method), cores)
        self._make = functools.partial(LocalMeasurer, target, settings, builders=max(1, min(builders, cores)),
                                       build_timeout=build_timeout, run_timeout=run_timeout, f_build=f_build,
                                       f_run=f_run, overlap=False)
        self._measurer: LocalMeasurer | None = None

    def describe(self) -> NodeInfo:
        """The context this node's timings are keyed by, and its usable cores."""
        return self.info

    def measure(self, batch: Sequence[tuple[str, Task]]) -> Iterator[tuple[str, CostRecord]]:
        """``(key, record)`` of every task of ``batch``, each as it is known."""
        if self._measurer is None:
            self._measurer = self._make()
            self._measurer.start()
        yield from self._measurer.measure(batch)

    def close(self) -> None:
        """Stop the worker processes (a batch in progress ends with them) and delete the libraries built here."""
        if self._measurer is not None:
            self._measurer.close()
            self._measurer = None
