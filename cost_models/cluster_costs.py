"""``ClusterCosts``: measure on a Ray cluster, every result written into this process's cost cache as it arrives.

The driver (this process) looks every task up in its cache as ``MeasuredCosts`` does, then hands the missing ones out
in batches to one ``NodeMeasurer`` actor per node offering the ``timing_slot`` resource (``cost_models.cluster_node``).
The actor holds that slot, so nothing else times its node meanwhile, builds each batch on the node's CPUs and times it
one task at a time, as one machine does (no timing overlaps a build or another timing there), and streams each record
back. The driver is the cache's only writer: it stores every record the moment it arrives and never stores a task
twice.

- Which nodes time: a node whose context (CPU model, TVM and template versions, as its actor reports them) is the
  target's (this machine's) times for the problem. Another node is refused, unless the cluster is ``key_by_node``:
  then it times, for records kept under its own context, the tasks its context lacks, while the target's nodes time
  everything for the problem, which only uses the target's records. Nodes that join later are used once found (the
  driver looks every ``DISCOVER_SECONDS``).
- Faults: a node that dies or stops answering is dropped; what it delivered is kept and the unfinished tasks of its
  batch go to the other nodes. With no node left to time for the target, the driver waits ``STALL_SECONDS`` for one
  to join before it gives up (``ClusterError``). A killed driver loses only the batches in flight (Ray ends its actors
  with it) and the next run skips everything the cache holds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import tvm

from cost_models.cache import DEFAULT_TIMING, Context, CostCache, CostRecord
from cost_models.cluster import TIMING_SLOT, Cluster, ClusterError, connect
from cost_models.cluster_node import NodeInfo, NodeMeasurer
from cost_models.exchange import put_or_set_aside
from cost_models.measure import (
    DEFAULT_BUILD,
    DEFAULT_RUN,
    CostProvider,
    MeasureError,
    NodeCount,
    Progress,
    ProgressTracker,
    check_settings,
    look_up,
    machine_context,
)
from cost_models.tasks import Task
from cost_models.workers import RunSettings

DISCOVER_SECONDS = 5.0
"""How often the driver looks for nodes that joined the cluster."""

POLL_SECONDS = 1.0
"""Longest wait for a record before the driver looks at the cluster again."""

STALL_SECONDS = 120.0
"""How long tasks may wait with no node able to time them for the target before the measurement gives up."""

CLOSE_SECONDS = 10.0
"""How long ``close`` lets the nodes' actors stop their processes before killing them."""


@dataclass(eq=False)
class _Node:
    """The driver's view of one node: its actor, the batch in flight and what it delivered."""

    name: str
    actor: Any
    describing: Any = None  # the actor's describe() reference until it answers
    info: NodeInfo | None = None
    state: str = "starting"
    reason: str = ""
    batch: tuple[str, ...] = ()
    stream: Any = None  # the records of the batch in flight (a Ray ObjectRefGenerator)
    measured: int = 0
    failures: int = 0
    for_target: bool = False

    def count(self) -> NodeCount:
        return NodeCount(self.name, self.measured, self.failures, self.state, self.reason)


class ClusterCosts(CostProvider):
    """Measure tasks on the nodes of a Ray cluster, caching every result in ``cache`` (see the module docstring).

    Parameters
    ----------
    cache
        The persistent cost cache; this process is its only writer for the measurement.
    target, threads, timing
        As ``MeasuredCosts``: the records the problem uses are keyed by this machine's context with them.
    cluster
        The cluster's address and whether other nodes' timings are kept under their own context (``key_by_node``).
    batch_size
        Tasks a node builds before it times them; a node measures one batch at a time.
    build_timeout, run_timeout, repeat, min_repeat_ms, f_build, f_run
        As ``MeasuredCosts``, on every node.
    progress
        Called with a ``Progress`` (each node's part in ``nodes``) after the cache lookup, after every record and
        whenever a node is found, refused or lost.

    Raises
    ------
    ClusterError
        The cluster cannot be joined (``cost_models.cluster.connect``); from ``measure``: no node may time for the
        target, or none is left for ``STALL_SECONDS``.
    """

    def __init__(
        self,
        cache: CostCache,
        *,
        target: tvm.target.Target | str,
        threads: int,
        cluster: Cluster,
        batch_size: int = 8,
        build_timeout: float = 120.0,
        run_timeout: float = 60.0,
        repeat: int = 5,
        min_repeat_ms: int = 50,
        timing: str = DEFAULT_TIMING,
        progress: Callable[[Progress], None] | None = None,
        f_build: str = DEFAULT_BUILD,
        f_run: str = DEFAULT_RUN,
    ) -> None:
        if threads < 1:
            raise MeasureError(f"threads must be >= 1, got {threads}")
        check_settings(batch_size=batch_size, build_timeout=build_timeout, run_timeout=run_timeout, repeat=repeat,
                       min_repeat_ms=min_repeat_ms, timing=timing, f_build=f_build, f_run=f_run)
        self.cache, self.cluster, self.progress, self.batch_size = cache, cluster, progress, batch_size
        self.context = machine_context(target, threads, timing)
        self.target = self.context.target
        self.settings = RunSettings(threads, repeat, min_repeat_ms, timing)
        self._actor_options = {"build_timeout": build_timeout, "run_timeout": run_timeout, "f_build": f_build,
                               "f_run": f_run}
        self.stats: dict[str, Any] = {"address": cluster.address, "submitted": 0, "resubmitted": 0}
        self._nodes: dict[str, _Node] = {}
        self._looked = -math.inf
        self._ray, self._joined = connect(cluster)

    def node_counts(self) -> tuple[NodeCount, ...]:
        """Every node found so far: its records in this provider's life and its state."""
        return tuple(node.count() for node in sorted(self._nodes.values(), key=lambda node: node.name))

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        """Records of ``tasks`` in order: cached ones looked up, the rest measured on the cluster (and cached) now."""
        lookup = look_up(self.cache, self.context, tasks)
        tracker = ProgressTracker(len(lookup.missing), len(lookup.records), self.progress, self.node_counts)
        if lookup.missing:
            try:
                _Run(self, lookup.missing, lookup.records, tracker).run()
            except (ConnectionError, self._ray.exceptions.RayError) as exc:  # the head node itself is gone
                raise ClusterError(f"lost the Ray cluster at {self.cluster.address} ({str(exc).strip()[:200]}); what "
                                   "was measured is in the cache, run again to measure the rest") from exc
        self.stats["nodes"] = {node.name: node.measured for node in self._nodes.values() if node.measured}
        return lookup.result()

    def close(self) -> None:
        """Stop every node's actor (and its processes), then leave the cluster if this provider joined it."""
        live = [node for node in self._nodes.values() if node.state not in ("lost", "refused")]
        try:
            closing = [node.actor.close.remote() for node in live]  # runs beside a batch in progress, ending it
            if closing:
                self._ray.wait(closing, num_returns=len(closing), timeout=CLOSE_SECONDS)
            for node in live:
                self._ray.kill(node.actor)
        except self._ray.exceptions.RayError:  # the cluster itself is gone: nothing left to stop there
            pass
        finally:
            self._nodes.clear()
            if self._joined:
                self._ray.shutdown()
                self._joined = False

    # ---------------------------------------------------------------------------------------------- nodes
    def discover(self) -> bool:
        """Start an actor on every node that joined since the last look (at most every ``DISCOVER_SECONDS``);
        whether one did."""
        if time.monotonic() - self._looked < DISCOVER_SECONDS:
            return False
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._looked, found = time.monotonic(), False
        for entry in self._ray.nodes():
            node_id, resources = entry["NodeID"], entry["Resources"]
            if not entry["Alive"] or node_id in self._nodes or resources.get(TIMING_SLOT, 0) < 1:
                continue
            name, cpus, found = f"{entry['NodeManagerAddress']}/{node_id[:6]}", int(resources.get("CPU", 0)), True
            if cpus < self.settings.threads:
                self._nodes[node_id] = _Node(name, None, state="refused", reason=f"it offers Ray {cpus} CPUs, fewer "
                                             f"than the {self.settings.threads} threads to time with")
                continue
            actor = self._ray.remote(NodeMeasurer).options(
                num_cpus=self.settings.threads, resources={TIMING_SLOT: 1}, max_restarts=0, max_concurrency=2,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(self.target, self.settings, builders=cpus, **self._actor_options)
            self._nodes[node_id] = _Node(name, actor, describing=actor.describe.remote())
        return found

    def admit(self, node: _Node) -> None:
        """Take a node's description: idle (for the target or, with ``key_by_node``, for its own context) or
        refused."""
        try:
            node.info = self._ray.get(node.describing)
        except self._ray.exceptions.RayError as exc:
            self.lose(node, exc)
            return
        node.describing = None
        node.for_target = node.info.context == self.context
        if node.info.cores < self.settings.threads:
            node.reason = f"{node.info.cores} usable cores, fewer than the {self.settings.threads} threads to time with"
        elif not node.for_target and not self.cluster.key_by_node:
            node.reason = _difference(node.info.context, self.context) + "; --key-by-node times there too"
        if node.reason:
            node.state = "refused"
            self._ray.kill(node.actor)  # frees its timing slot (it has started no process yet)
        else:
            node.state = "idle"

    def submit(self, node: _Node, batch: list[tuple[str, Task]]) -> None:
        """Send ``batch`` to ``node``'s actor."""
        node.batch, node.state = tuple(key for key, _ in batch), "measuring"
        node.stream = node.actor.measure.remote(batch)
        self.stats["submitted"] += len(batch)

    def lose(self, node: _Node, exc: BaseException) -> tuple[str, ...]:
        """Drop a node that died or failed (its actor killed, in case it still runs); returns its unfinished keys."""
        unfinished = node.batch
        node.state, node.reason = "lost", str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        node.batch, node.stream, node.describing = (), None, None
        self._ray.kill(node.actor)
        return unfinished

    def nodes(self) -> list[_Node]:
        return list(self._nodes.values())


class _Run:
    """One ``measure`` call's loop: hand batches to idle nodes, store records as they arrive, requeue a lost node's
    unfinished tasks, and give up when no node can time for the target for ``STALL_SECONDS``."""

    def __init__(self, costs: ClusterCosts, missing: dict[str, Task], records: dict[str, CostRecord],
                 tracker: ProgressTracker) -> None:
        self.costs, self.ray, self.missing, self.records, self.tracker = costs, costs._ray, missing, records, tracker
        self.queue = deque(missing)  # keys still to time for the target
        self.taken: dict[Context, set[str]] = {}  # keys handed to (or found in the cache for) other contexts
        self.stalled_since = time.monotonic()

    def run(self) -> None:
        while self.queue or self._busy(for_target=True):
            if self.costs.discover():
                self.tracker.report()
            self._hand_out()
            self._check_stall()
            self._wait()
        while self._busy(for_target=False):  # batches timed for other contexts end too: nothing measured is lost
            self._wait()

    def _busy(self, *, for_target: bool) -> bool:
        return any(node.stream is not None and node.for_target == for_target for node in self.costs.nodes())

    def _hand_out(self) -> None:
        for node in self.costs.nodes():
            if node.state != "idle" or not self.queue:
                continue
            keys = self._for_target() if node.for_target else self._for_context(node.info.context)
            if keys:
                self.costs.submit(node, [(key, self.missing[key]) for key in keys])

    def _for_target(self) -> list[str]:
        return [self.queue.popleft() for _ in range(min(self.costs.batch_size, len(self.queue)))]

    def _for_context(self, context: Context) -> list[str]:
        """Queued keys that ``context`` lacks and no node of it has been given, from the end of the queue."""
        taken = self.taken.setdefault(context, set())
        wanted = [key for key in reversed(self.queue) if key not in taken][: 4 * self.costs.batch_size]
        taken.update(self.costs.cache.get_many(context, wanted))
        keys = [key for key in wanted if key not in taken][: self.costs.batch_size]
        taken.update(keys)
        return keys

    def _check_stall(self) -> None:
        nodes = self.costs.nodes()
        if any(node.for_target and node.state in ("idle", "measuring") for node in nodes):
            self.stalled_since = time.monotonic()
            return
        waiting = time.monotonic() - self.stalled_since
        hopeless = not any(node.state == "starting" for node in nodes) and not any(node.for_target for node in nodes)
        if waiting > STALL_SECONDS or (hopeless and waiting > DISCOVER_SECONDS):
            states = "; ".join(f"{count.node} {count.state}" + (f" ({count.reason})" if count.reason else "")
                               for count in self.costs.node_counts()) or f"no node offers {TIMING_SLOT!r}"
            raise ClusterError(f"no node of the cluster at {self.costs.cluster.address} can time for this machine "
                               f"({states}); start nodes with ray start --resources '{{\"{TIMING_SLOT}\": 1}}' on "
                               "machines like this one (see docs/cluster.md)")

    def _wait(self) -> None:
        waiting = {}
        for node in self.costs.nodes():
            if node.stream is not None or node.describing is not None:
                waiting[node.stream if node.stream is not None else node.describing] = node
        if not waiting:
            time.sleep(POLL_SECONDS)
            return
        ready, _ = self.ray.wait(list(waiting), num_returns=1, timeout=POLL_SECONDS)
        for ref in ready:
            node = waiting[ref]
            if node.describing is not None:
                self.costs.admit(node)
                self.tracker.report()
            else:
                self._receive(node)

    def _receive(self, node: _Node) -> None:
        try:
            key, record = self.ray.get(next(node.stream))
        except StopIteration:
            node.stream, node.state = None, "idle"
            self._requeue(node, node.batch)  # none unless the actor skipped a task
            node.batch = ()
            return
        except self.ray.exceptions.RayError as exc:
            self._requeue(node, self.costs.lose(node, exc))
            self.tracker.report()
            return
        node.batch = tuple(other for other in node.batch if other != key)
        node.measured += 1
        node.failures += not record.ok
        if not node.for_target:
            put_or_set_aside(self.costs.cache, node.info.context, key, record)
            self.tracker.report()
        elif key not in self.records:
            put_or_set_aside(self.costs.cache, self.costs.context, key, record)
            self.records[key] = record
            self.tracker.finished(record.ok)

    def _requeue(self, node: _Node, keys: tuple[str, ...]) -> None:
        """Give ``keys`` to other nodes: back to the front of the queue, or free for other nodes of its context."""
        if node.for_target:
            self.queue.extendleft(reversed(keys))
            self.costs.stats["resubmitted"] += len(keys)
        elif node.info is not None:
            self.taken.get(node.info.context, set()).difference_update(keys)


def _difference(node: Context, target: Context) -> str:
    """How a node's context differs from the target's, for the reason it is refused."""
    return ", ".join(f"{f.name} {getattr(node, f.name)!r} where the target has {getattr(target, f.name)!r}"
                     for f in fields(Context) if getattr(node, f.name) != getattr(target, f.name))
