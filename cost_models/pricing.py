"""Pricing a tuning space: the measurement tasks a graph's space needs, and the ``solvers.Problem`` their records
give.

Costs are in milliseconds:

- a **node** candidate costs its kernel's measured time (nodes of a kernel kind: conv2d, dense, ...), plus the
  layout transforms of its boundary reads (a fixed NCHW tensor into the candidate's layout) and boundary writes (its
  output back to NCHW); a failed measurement forbids the candidate;
- an **edge** matrix entry is the transform of the edge's tensor from the producer candidate's output layout to the
  layout the consumer candidate needs on that input (0 when they agree; a failed measurement forbids the pair);
  several edges between the same two nodes reading the same tensor in the same layout pay for one transform, as the
  exported module shares it;
- nodes of a kind without a kernel (concat, add) and follower ops (pooling, relu, per-channel scale, ...) cost 0 in
  every layout: they are memory-bound, move the same bytes whatever the layout, and are not measured.

The pairwise model charges every consumer for its own transform, where the exported module converts a tensor once
per wanted layout, so predicted costs can exceed the module's when one tensor feeds several consumers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cost_models.cache import CostRecord
from cost_models.tasks import KernelTask, Task, TransformTask
from search.candidates import Candidate, kernel_spec
from search.errors import SearchError
from search.graph import OpGraph
from search.kinds import KernelKind, get_kind
from search.templates.common import unit
from solvers.problem import Problem

Carried = list[tuple[str, tuple[int, ...], str]]  # (tensor, logical shape, side of the consumer) an edge group carries


def _layout_on(candidate: Candidate, side: str) -> str:
    return candidate.in_layout if side == "in" else candidate.out_layout


def kernel_task(graph: OpGraph, node: str, candidate: Candidate) -> KernelTask | None:
    """The kernel measurement behind ``node``'s ``candidate`` (None for a kind without a kernel: concat and add
    cost 0)."""
    op = graph.op(node)
    return KernelTask(kernel_spec(op, candidate)) if isinstance(get_kind(op.kind), KernelKind) else None


class _Costing:
    """Enumerates the tasks of a graph's space and, once their records are known, prices nodes and edges."""

    def __init__(self, graph: OpGraph, space: Mapping[str, Sequence[Candidate]]) -> None:
        missing = [op.name for op in graph.tunable if not space.get(op.name)]
        if missing:
            raise SearchError(f"no candidates for node(s) {', '.join(missing)}")
        self.graph, self.space = graph, space
        self.records: dict[Task, CostRecord] = {}

    # ----------------------------------------------------------------------------------- what each cost is made of
    def kernel_task(self, node: str, candidate: Candidate) -> KernelTask | None:
        return kernel_task(self.graph, node, candidate)

    def node_transforms(self, node: str, candidate: Candidate) -> list[TransformTask]:
        reads = [TransformTask(tuple(r.shape), "NCHW", _layout_on(candidate, r.side))
                 for r in self.graph.boundary_reads if r.node == node]
        writes = [TransformTask(tuple(w.shape), candidate.out_layout, "NCHW")
                  for w in self.graph.boundary_writes if w.node == node]
        return [task for task in reads + writes if task.src != task.dst]

    def edge_groups(self) -> dict[tuple[str, str], Carried]:
        """(src, dst) -> the (tensor, shape, side) the edges between them carry, each tensor-side once."""
        groups: dict[tuple[str, str], Carried] = {}
        for edge in self.graph.edges:
            value = self.graph.op(edge.dst).inputs[edge.dst_input]
            entry = (value, tuple(edge.shape), edge.dst_side)
            group = groups.setdefault((edge.src, edge.dst), [])
            if entry not in group:
                group.append(entry)
        return groups

    @staticmethod
    def edge_transforms(carried: Carried, source_layout: str, consumer: Candidate) -> list[TransformTask]:
        """Transforms for one candidate pair: one per distinct (tensor, wanted layout) that differs from the source."""
        wanted = dict.fromkeys((value, shape, _layout_on(consumer, side)) for value, shape, side in carried)
        return [TransformTask(shape, source_layout, layout) for _, shape, layout in wanted if layout != source_layout]

    def tasks(self) -> list[Task]:
        """Every distinct measurement the problem needs, kernels first."""
        kernels, transforms = [], []
        for node, candidates in self.space.items():
            for candidate in candidates:
                kernels.append(self.kernel_task(node, candidate))
                transforms += self.node_transforms(node, candidate)
        for (src, dst), carried in self.edge_groups().items():
            for source_layout in dict.fromkeys(c.out_layout for c in self.space[src]):
                for consumer in self.space[dst]:
                    transforms += self.edge_transforms(carried, source_layout, consumer)
        return list(dict.fromkeys(task for task in kernels + transforms if task is not None))

    # ----------------------------------------------------------------------------------- prices
    def cost(self, task: Task) -> float:
        record = self.records[task]
        return float(record.median_ms) if record.ok else math.inf

    def node_costs(self, node: str) -> list[float]:
        costs = []
        for candidate in self.space[node]:
            task = self.kernel_task(node, candidate)
            kernel = self.cost(task) if task is not None else 0.0
            costs.append(kernel + sum(self.cost(t) for t in self.node_transforms(node, candidate)))
        return costs

    def edge_matrix(self, src: str, dst: str, carried: Carried) -> list[list[float]]:
        """Rows: ``src``'s candidates; a row depends only on the candidate's output layout."""
        rows: dict[str, list[float]] = {}
        for layout in dict.fromkeys(c.out_layout for c in self.space[src]):
            rows[layout] = [sum(self.cost(t) for t in self.edge_transforms(carried, layout, consumer))
                            for consumer in self.space[dst]]
        return [rows[producer.out_layout] for producer in self.space[src]]

    def candidate_meta(self, node: str) -> dict[str, Any]:
        """candidate name -> layouts, knobs, and the kernel record behind its cost."""
        out = {}
        for candidate in self.space[node]:
            entry: dict[str, Any] = {"in_layout": candidate.in_layout, "out_layout": candidate.out_layout,
                                     "knobs": dict(candidate.knobs)}
            task = self.kernel_task(node, candidate)
            if task is not None:
                record = self.records[task]
                if record.ok:
                    entry.update(kernel_ms=float(record.median_ms), kernel_spread_ms=record.spread_ms)
                else:
                    entry.update(kernel_ms=None, error=record.error or "no timing")
            out[candidate.name] = entry
        return out


def measurement_tasks(graph: OpGraph, space: Mapping[str, Sequence[Candidate]]) -> list[Task]:
    """Every distinct kernel and layout-transform measurement ``build_problem`` needs for ``space``."""
    return _Costing(graph, space).tasks()


def build_problem(
    graph: OpGraph,
    space: Mapping[str, Sequence[Candidate]],
    measure: Callable[[list[Task]], Sequence[CostRecord]],
    *,
    meta: Mapping[str, Any] | None = None,
) -> Problem:
    """The node/edge cost problem of ``graph`` over ``space`` (node -> candidates), priced by ``measure``.

    Parameters
    ----------
    graph : OpGraph
        The model's graph.
    space : dict of str to list of Candidate
        Candidates per tunable node (see ``tuning_space``); problem candidate names are ``Candidate.name``.
    measure : callable
        ``tasks -> records`` (one ``CostRecord`` per task, in order), e.g. a cost provider's ``measure``; it is
        called once, with every distinct task.
    meta : dict, optional
        Extra provenance (model, args, cost source) stored in ``problem.meta`` next to ``candidates``.

    Raises
    ------
    SearchError
        If a node has no candidates or every candidate of a node failed to measure.
    """
    costing = _Costing(graph, space)
    tasks = costing.tasks()
    records = list(measure(tasks))
    if len(records) != len(tasks):
        raise RuntimeError(f"cost provider returned {len(records)} records for {len(tasks)} tasks")
    costing.records = dict(zip(tasks, records))
    nodes = []
    for op in graph.tunable:
        costs = costing.node_costs(op.name)
        if all(math.isinf(c) for c in costs):
            errors = {e for e in (m.get("error") for m in costing.candidate_meta(op.name).values()) if e}
            raise SearchError(f"every candidate of {op.name} ({op.kind}) failed to measure: {'; '.join(errors)}")
        nodes.append((op.name, [c.name for c in space[op.name]], costs))
    edges = [(src, dst, costing.edge_matrix(src, dst, carried))
             for (src, dst), carried in costing.edge_groups().items()]
    candidates = {op.name: costing.candidate_meta(op.name) for op in graph.tunable}
    meta = {**dict(meta or {}), "unit": "ms", "vector_unit": unit().name, "candidates": candidates}
    return Problem.build(nodes, edges, meta)
