"""Pricing a tuning space: the measurement tasks a graph's space needs, and the ``solvers.Problem`` their records
give.

Costs are in milliseconds:

- a **node** candidate costs its kernel's measured time (nodes of a kernel kind: conv2d, dense, ...); a failed
  measurement forbids the candidate;
- a **layout transform** is priced as the exported module runs it: once per value and layout it is read in
  (``OpGraph.layout_values``). A read's conversion (from the layout the producer candidate stores the value in into
  the layout the reader candidate wants, 0 when they agree) goes on the edge between producer and reader, or on the
  node when the other end is fixed NCHW, or NC for a linear layer's rows (a model input or fixed op read by a node, a
  node's value read by a fixed op or an output), as do the transforms a layout-free kernel (``batch_matmul``) asks
  for around itself (``KernelKind.conversions``: attention's head split and merge, unless the kernel reads through
  them). Where two
  reads of a value may want the same layout, one *auxiliary* node for that value and layout prices the conversion once
  instead: its candidates are ``absent`` and ``present``, the edge to the producer prices
  ``present`` (the conversion, or nothing where the producer stores that layout), and the edge to each reader forbids
  ``absent`` where the reader wants that layout. ``problem.meta["auxiliary"]`` lists these nodes; plans leave them out
  and ``plan_cost`` completes them. ``shared=False`` prices every read on its own instead (pairwise, smaller; it
  overcounts where a value is read several times in one layout);
- a node's **chain**, what it runs besides its kernel in its output layout, is measured too (``ChainTask``): a concat
  or add node's own op and the followers after a node (pooling, BatchNorm's scale and shift, relu, ...), compiled as
  export fuses them and timed through the Relax VM. Followers of fixed NCHW values cost the same in every plan and
  are not priced. A concat in place (its producers write their slices of its output, which must then be stored in
  its layout: other pairs are forbidden) runs only its followers, and the copies of the inputs no kernel writes
  (``ChainTask`` head ``copy``, on the family's owner; ``search.in_place``); an edge between a family's owner and each
  of its views forbids all but both in place in one layout or neither.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cost_models.cache import CostRecord
from cost_models.tasks import ChainTask, KernelTask, Task, TransformTask
from search.candidates import Candidate, kernel_spec
from search.errors import SearchError
from search.graph import LayoutValue, OpGraph, Read
from search.in_place import written_inputs
from search.kinds import IN_PLACE, KernelKind, get_kind, kernel_kind
from search.kinds.base import COPIED, VIEW_OF, VIEWS
from search.layouts import fixed_layout
from search.op import Op
from search.templates.common import unit
from solvers.problem import Problem


def _layout_on(candidate: Candidate, side: str) -> str:
    return candidate.in_layout if side == "in" else candidate.out_layout


def kernel_task(graph: OpGraph, node: str, candidate: Candidate) -> KernelTask | None:
    """The kernel measurement behind ``node``'s ``candidate`` (None for a kind without a kernel: concat and add
    cost 0)."""
    op = graph.op(node)
    return KernelTask(kernel_spec(op, candidate)) if isinstance(get_kind(op.kind), KernelKind) else None


ABSENT, PRESENT = "absent", "present"
Pairs = list[tuple[LayoutValue, Read]]  # the reads of values between two tunable nodes


def chain_task(graph: OpGraph, node: str, candidate: Candidate, followers: Sequence[Op] | None = None
               ) -> ChainTask | None:
    """What ``node`` runs besides its kernel in ``candidate``'s output layout: a layout kind's own op and the
    followers after the node (``followers``, default ``graph.followers_of(node)``); None for a kernel or an in-place
    concat without followers, with a non-4-D output or of a layout-free kind."""
    op = graph.op(node)
    followers = graph.followers_of(node) if followers is None else followers
    described = tuple((f.kind, tuple(sorted(f.attrs.items()))) for f in followers)
    copied = [shape for value, shape in zip(op.inputs, op.input_shapes) if value in op.attrs.get(COPIED, ())]
    if candidate.in_place and VIEW_OF not in op.attrs and copied:  # the owner copies what no kernel writes
        return ChainTask("copy", (*copied, op.shape), described, candidate.out_layout)
    if isinstance(get_kind(op.kind), KernelKind) or candidate.in_place:
        if not followers or len(op.shape) != 4 or op.layout_free:
            return None
        return ChainTask("output", (op.shape,), described, candidate.out_layout)
    attrs = tuple(sorted((name, op.attrs[name]) for name in get_kind(op.kind).attributes))
    return ChainTask(op.kind, op.input_shapes, described, candidate.out_layout, attrs)


class _Costing:
    """Enumerates the tasks of a graph's space and, once their records are known, prices nodes, edges and the
    auxiliary nodes of values read several times."""

    def __init__(self, graph: OpGraph, space: Mapping[str, Sequence[Candidate]], shared: bool = True,
                 chains: bool = True) -> None:
        missing = [op.name for op in graph.tunable if not space.get(op.name)]
        if missing:
            raise SearchError(f"no candidates for node(s) {', '.join(missing)}")
        self.graph, self.space = graph, space
        self.records: dict[Task, CostRecord] = {}
        values = graph.layout_values()
        if not shared:  # every read on its own: a pairwise approximation that charges each reader
            values = [replace(value, reads=(read,)) for value in values for read in value.reads]
        self.from_fixed: dict[str, Pairs] = defaultdict(list)  # node -> its reads of fixed NCHW values
        self.to_fixed: dict[str, Pairs] = defaultdict(list)  # node -> fixed reads of its values
        self.between: dict[tuple[str, str], Pairs] = defaultdict(list)  # (producer, reader) -> reads
        for value in values:
            for read in value.reads:
                if value.producer is None:
                    self.from_fixed[read.node].append((value, read))
                elif read.node is None:
                    self.to_fixed[value.producer].append((value, read))
                else:
                    self.between[(value.producer, read.node)].append((value, read))
        self.followers: dict[str, tuple] = {}  # node -> its followers' (kind, attributes), once looked up
        self.chains = chains
        self.auxiliary = [(value, layout) for value in values if len(value.reads) > 1
                          for layout in self.shared_layouts(value)]
        self.aux_keys = {(value.name, layout) for value, layout in self.auxiliary}

    # ----------------------------------------------------------------------------------- what each cost is made of
    def kernel_task(self, node: str, candidate: Candidate) -> KernelTask | None:
        return kernel_task(self.graph, node, candidate)

    def chain_task(self, node: str, candidate: Candidate) -> ChainTask | None:
        if node not in self.followers:
            self.followers[node] = self.graph.followers_of(node)
        return chain_task(self.graph, node, candidate, self.followers[node])

    def stored(self, value: LayoutValue) -> list[str]:
        """The layouts ``value`` may be stored in: its producer's output layouts, or NCHW (NC)."""
        if value.producer is None:
            return [fixed_layout(value.shape)]
        return list(dict.fromkeys(c.out_layout for c in self.space[value.producer]))

    @staticmethod
    def wanted(value: LayoutValue, read: Read, candidate: Candidate | None) -> str:
        """The layout ``read`` of ``value`` wants when its node runs as ``candidate`` (NCHW or NC for a fixed
        reader)."""
        return fixed_layout(value.shape) if read.node is None else _layout_on(candidate, read.side)

    def shared_layouts(self, value: LayoutValue) -> list[str]:
        """The layouts two reads of ``value`` may want and its producer may not store it in: each gets an auxiliary
        node (a layout only one read can want is priced on that read's edge or node)."""
        wanting: dict[str, int] = defaultdict(int)
        for read in value.reads:
            candidates = self.space[read.node] if read.node is not None else [None]
            for layout in dict.fromkeys(self.wanted(value, read, c) for c in candidates):
                wanting[layout] += 1
        return [layout for layout, count in wanting.items() if count > 1 and self.stored(value) != [layout]]

    def read_transforms(self, pairs: Pairs, stored: str | None, candidate: Candidate | None) -> list[TransformTask]:
        """The conversions ``pairs`` (value, read) need when the value is stored in ``stored`` (None: each value's
        fixed NCHW or NC) and the reading node runs as ``candidate`` (None: fixed readers); those an auxiliary node
        prices are left out."""
        tasks = []
        for value, read in pairs:
            layout, source = self.wanted(value, read, candidate), stored or fixed_layout(value.shape)
            if layout != source and (value.name, layout) not in self.aux_keys:
                tasks.append(TransformTask(value.shape, source, layout))
        return list(dict.fromkeys(tasks))

    def node_transforms(self, node: str, candidate: Candidate) -> list[TransformTask]:
        """The conversions between ``node`` as ``candidate`` and fixed NCHW (NC) values and readers, and those a
        layout-free kernel runs around itself."""
        op = self.graph.op(node)
        own = []
        if op.layout_free:
            own = [TransformTask(c.shape, c.src, c.dst)
                   for c in kernel_kind(op.kind).conversions(op, kernel_spec(op, candidate))]
        return (self.read_transforms(self.from_fixed.get(node, []), None, candidate)
                + self.read_transforms(self.to_fixed.get(node, []), candidate.out_layout, None) + own)

    def tasks(self) -> list[Task]:
        """Every distinct measurement the problem needs, kernels first."""
        kernels, transforms = [], []
        for node, candidates in self.space.items():
            for candidate in candidates:
                kernels.append(self.kernel_task(node, candidate))
                kernels.append(self.chain_task(node, candidate) if self.chains else None)
                transforms += self.node_transforms(node, candidate)
        for (src, dst), pairs in self.between.items():
            for source_layout in dict.fromkeys(c.out_layout for c in self.space[src]):
                for consumer in self.space[dst]:
                    transforms += self.read_transforms(pairs, source_layout, consumer)
        for value, layout in self.auxiliary:
            transforms += [TransformTask(value.shape, s, layout) for s in self.stored(value) if s != layout]
        return list(dict.fromkeys(task for task in kernels + transforms if task is not None))

    # ----------------------------------------------------------------------------------- prices
    def cost(self, task: Task) -> float:
        record = self.records[task]
        return float(record.median_ms) if record.ok else math.inf

    def node_costs(self, node: str) -> list[float]:
        costs = []
        for candidate in self.space[node]:
            own = [self.kernel_task(node, candidate), self.chain_task(node, candidate) if self.chains else None]
            costs.append(sum(self.cost(t) for t in own + self.node_transforms(node, candidate) if t is not None))
        return costs

    def edge_matrix(self, src: str, dst: str, pairs: Pairs) -> list[list[float]]:
        """Rows: ``src``'s candidates; a row depends only on the candidate's output layout. A consumer running in
        place forbids producers storing another layout than its own if they write into its output (and do not have
        their value copied in)."""
        written = set(written_inputs(self.graph.op(dst))) if self.graph.op(dst).attrs.get(IN_PLACE) else set()
        writes = any(value.name in written for value, _ in pairs)
        rows: dict[str, list[float]] = {}
        for layout in dict.fromkeys(c.out_layout for c in self.space[src]):
            rows[layout] = [math.inf if consumer.in_place and writes and layout != consumer.in_layout else
                            sum(self.cost(t) for t in self.read_transforms(pairs, layout, consumer))
                            for consumer in self.space[dst]]
        return [rows[producer.out_layout] for producer in self.space[src]]

    def family_matrix(self, owner: str, view: str) -> list[list[float]]:
        """Rows: in-place concat ``owner``'s candidates, columns: its view ``view``'s. Both run in place, in one
        layout, or neither does."""
        return [[0.0 if o.in_place == v.in_place and (not o.in_place or o.out_layout == v.out_layout) else math.inf
                 for v in self.space[view]] for o in self.space[owner]]

    def conversion(self, value: LayoutValue, source: str, layout: str) -> float:
        return 0.0 if source == layout else self.cost(TransformTask(value.shape, source, layout))

    def auxiliary_terms(self, value: LayoutValue, layout: str) -> tuple[list[float], list[tuple[str, list]]]:
        """The auxiliary node of ``value`` in ``layout`` (candidates ``absent``, ``present``): its costs and its
        edges, each (neighbour, matrix with the neighbour's candidates as rows). ``present`` pays the conversion
        from what the producer stores (nothing if it stores ``layout``); ``absent`` is forbidden where a read wants
        ``layout``."""
        fixed = fixed_layout(value.shape)
        needed = any(read.node is None for read in value.reads) and layout == fixed
        present = self.conversion(value, fixed, layout) if value.producer is None else 0.0
        edges = []
        if value.producer is not None:
            edges.append((value.producer, [[0.0, self.conversion(value, p.out_layout, layout)]
                                           for p in self.space[value.producer]]))
        for read in value.reads:
            if read.node is not None:
                edges.append((read.node, [[math.inf if _layout_on(c, read.side) == layout else 0.0, 0.0]
                                          for c in self.space[read.node]]))
        return [math.inf if needed else 0.0, present], edges

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


def measurement_tasks(graph: OpGraph, space: Mapping[str, Sequence[Candidate]], *, shared: bool = True,
                      chains: bool = True) -> list[Task]:
    """Every distinct kernel, chain and layout-transform measurement ``build_problem`` needs for ``space``."""
    return _Costing(graph, space, shared, chains).tasks()


def build_problem(
    graph: OpGraph,
    space: Mapping[str, Sequence[Candidate]],
    measure: Callable[[list[Task]], Sequence[CostRecord]],
    *,
    meta: Mapping[str, Any] | None = None,
    shared: bool = True,
    chains: bool = True,
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
    shared : bool
        Price each conversion of a value once, as the module runs it, with auxiliary nodes (the default); False
        charges every read on its own (pairwise, no auxiliary nodes: smaller problems, costs can exceed the module's
        where a value is read several times in one layout).
    chains : bool
        Price what a node runs besides its kernel in its output layout (``ChainTask``: a concat's or add's own op,
        the followers after a node, as export fuses and runs them); False prices only kernels and transforms.

    Raises
    ------
    SearchError
        If a node has no candidates or every candidate of a node failed to measure.
    """
    costing = _Costing(graph, space, shared, chains)
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
    edges = [(src, dst, costing.edge_matrix(src, dst, pairs)) for (src, dst), pairs in costing.between.items()]
    edges += [(op.name, view, costing.family_matrix(op.name, view)) for op in graph.tunable
              for view in op.attrs.get(VIEWS, ())]
    auxiliary = []
    for value, layout in costing.auxiliary:
        name = f"{value.name}@{layout}"
        costs, aux_edges = costing.auxiliary_terms(value, layout)
        nodes.append((name, [ABSENT, PRESENT], costs))
        auxiliary.append(name)
        edges += [(other, name, matrix) for other, matrix in aux_edges]  # the auxiliary after its neighbours
    candidates = {op.name: costing.candidate_meta(op.name) for op in graph.tunable}
    meta = {**dict(meta or {}), "unit": "ms", "vector_unit": unit().name, "candidates": candidates,
            "auxiliary": auxiliary}
    return Problem.build(nodes, edges, meta)


def plan_assignment(problem: Problem, choices: Mapping[str, str]) -> dict[str, str]:
    """``choices`` (a plan: every tunable node) completed with the cheapest state of each auxiliary node given
    them (auxiliary nodes only neighbour tunable nodes, so each is chosen on its own)."""
    full = dict(choices)
    neighbours = problem.neighbors()
    for name in problem.meta.get("auxiliary", ()):
        u = problem.index(name)
        costs = problem.nodes[u].costs.copy()
        for v in neighbours[u]:
            matrix = problem.pairs[(u, v)] if u < v else problem.pairs[(v, u)].T
            costs = costs + matrix[:, problem.nodes[v].candidates.index(full[problem.nodes[v].name])]
        full[name] = problem.nodes[u].candidates[int(costs.argmin())]
    return full


def plan_cost(problem: Problem, choices: Mapping[str, str]) -> float:
    """The problem's cost of a plan (``choices`` of the tunable nodes; auxiliary nodes completed)."""
    return problem.evaluate(plan_assignment(problem, choices))
