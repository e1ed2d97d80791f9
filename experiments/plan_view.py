"""What a picture of a plan shows: the operator graph with each node's chosen layouts, knobs and cost, and the layout
transforms the plan puts on its edges.

``plan_view(graph, plan, problem)`` collapses the followers (relu, BatchNorm's scale and shift, pooling) into the
node they follow, as export fuses them, and keeps the tunable nodes, the fixed operators, the model inputs and one
``output`` node. An edge is one read; it carries a *transform* when the layout its producer stores the value in (NCHW
for a fixed operator or a model input) differs from the layout its reader wants (NCHW for a fixed operator or an
output). The exported module converts a value once per layout it is read in, so the reads of one value in one layout
share one conversion (``ViewEdge.shared_by``).

Costs come from the plan's cost problem when one is given (``cost_models.pricing``): a node's cost is its candidate's
(kernel, chain, and conversions from and to fixed NCHW tensors that no auxiliary node prices); a transform's is the
auxiliary node's conversion of that value to that layout (``--transforms shared``), else the edge's matrix entry.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from search.errors import SearchError
from search.graph import OpGraph
from search.layouts import activation_shape, fixed_layout
from search.op import Op
from search.plan import Plan, validate
from search.precision import precision_of
from solvers.problem import Problem

OUTPUT = "output"
"""The name of the node every model output flows into."""


@dataclass(frozen=True)
class ViewNode:
    """One node of the picture: a tunable op with its chosen ``in_layout``, ``out_layout`` and ``knobs``, a fixed op
    (``role`` ``fixed``), a model input (``input``) or the outputs (``output``); ``about`` is a short description
    (``3x3/2 64>128``) and ``cost_ms`` the problem's cost of the node's candidate (None without a problem)."""

    name: str
    kind: str
    role: str
    about: str
    in_layout: str
    out_layout: str
    knobs: tuple[tuple[str, int], ...] = ()
    cost_ms: float | None = None


@dataclass(frozen=True)
class ViewEdge:
    """One read of ``value`` by ``dst`` from ``src``: stored in ``source_layout``, wanted in ``target_layout`` (both
    ``""`` for tensors that are not 4-D). A transform costs ``cost_ms`` when the problem prices it apart from the
    nodes; ``shared_by`` reads of the value in that layout share the conversion."""

    src: str
    dst: str
    value: str
    source_layout: str
    target_layout: str
    cost_ms: float | None = None
    shared_by: int = 1

    @property
    def transform(self) -> bool:
        return self.source_layout != self.target_layout


@dataclass(frozen=True)
class PlanView:
    """The nodes and edges to draw (in topological order), the plan's total cost (None without a problem, ``inf``
    when it picks a forbidden candidate) and where the costs come from (``""``: no costs)."""

    model: str
    nodes: tuple[ViewNode, ...]
    edges: tuple[ViewEdge, ...]
    total_ms: float | None = None
    costs_from: str = ""

    @property
    def transforms(self) -> tuple[ViewEdge, ...]:
        """The reads that need a layout transform."""
        return tuple(edge for edge in self.edges if edge.transform)

    @property
    def bf16(self) -> int:
        """The operators computing in bf16."""
        return sum(precision_of(node.knobs) == "bf16" for node in self.nodes)

    @property
    def conversions(self) -> int:
        """Distinct conversions (a value into a layout), as the exported module runs them."""
        return len({(edge.value, edge.target_layout) for edge in self.transforms})


def plan_view(graph: OpGraph, plan: Plan, problem: Problem | None = None, *, costs_from: str = "") -> PlanView:
    """The picture's content for ``plan`` on ``graph``, priced by ``problem`` if given (named ``costs_from``).

    Raises
    ------
    SearchError
        If the plan does not fit the graph (``search.plan.validate``) or the problem does not price the plan.
    """
    chosen = validate(plan, graph)
    priced = _Pricing(problem, plan.choices, costs_from or "the problem") if problem is not None else None
    nodes = [ViewNode(name, "input", "input", _shape_text(shape), *[_fixed_layout(shape)] * 2)
             for name, shape in graph.inputs]
    edges = []
    for op in graph.ops:
        if op.role == "follower":
            continue
        if op.role == "tunable":
            candidate = chosen[op.name]
            cost = priced.node_cost(op.name) if priced else None
            nodes.append(ViewNode(op.name, op.kind, "tunable", _about(op), candidate.in_layout, candidate.out_layout,
                                  candidate.knobs, cost))
        else:
            nodes.append(ViewNode(op.name, op.kind, "fixed", _shape_text(op.shape), *[_fixed_layout(op.shape)] * 2))
        for index, (value, shape) in enumerate(zip(op.inputs, op.input_shapes)):
            src = _producer(graph, value)
            wanted = _fixed_layout(shape)
            if op.role == "tunable" and activation_shape(shape) is not None and not op.layout_free:
                candidate = chosen[op.name]
                wanted = candidate.in_layout if op.input_sides[index] == "in" else candidate.out_layout
            edges.append(ViewEdge(src, op.name, value, _stored(graph, chosen, src, shape), wanted))
    if graph.outputs:
        shapes = " ".join(_shape_text(_value_shape(graph, value)) for value in graph.outputs)
        nodes.append(ViewNode(OUTPUT, OUTPUT, OUTPUT, shapes, "", ""))
    for value in graph.outputs:
        src, shape = _producer(graph, value), _value_shape(graph, value)
        edges.append(ViewEdge(src, OUTPUT, value, _stored(graph, chosen, src, shape), _fixed_layout(shape)))
    edges = _with_transform_costs(edges, priced)
    total = priced.total if priced else None
    return PlanView(plan.model, tuple(nodes), tuple(edges), total, costs_from if priced else "")


class _Pricing:
    """The problem's costs of a plan: its assignment completed with the auxiliary nodes."""

    def __init__(self, problem: Problem, choices: dict[str, str], where: str) -> None:
        from cost_models.pricing import plan_assignment

        auxiliary = set(problem.meta.get("auxiliary", ()))
        names = {node.name for node in problem.nodes} - auxiliary
        unpriced, missing = sorted(set(choices) - names), sorted(names - set(choices))
        if unpriced:
            raise SearchError(f"{where} does not price this plan: it has no node {', '.join(unpriced[:5])}")
        if missing:
            raise SearchError(f"{where} does not price this plan: the plan has no node {', '.join(missing[:5])}")
        for name, candidate in choices.items():
            if candidate not in problem.nodes[problem.index(name)].candidates:
                raise SearchError(f"{where} does not price this plan: node {name} has no candidate {candidate!r}")
        self.problem, self.auxiliary = problem, auxiliary
        self.assignment = plan_assignment(problem, choices)
        self.total = problem.evaluate(self.assignment)

    def node_cost(self, name: str) -> float:
        node = self.problem.nodes[self.problem.index(name)]
        return float(node.costs[node.candidates.index(self.assignment[name])])

    def pair_cost(self, a: str, b: str) -> float:
        """The edge term between nodes ``a`` and ``b`` at the plan's candidates (0 without an edge)."""
        u, v = self.problem.index(a), self.problem.index(b)
        matrix = self.problem.pairs.get((min(u, v), max(u, v)))
        if matrix is None:
            return 0.0
        i, j = (self.problem.nodes[w].candidates.index(self.assignment[self.problem.nodes[w].name]) for w in (u, v))
        return float(matrix[i, j] if u < v else matrix[j, i])

    def conversion(self, edge: ViewEdge) -> float | None:
        """What converting ``edge``'s value costs: its auxiliary node's conversion, else the matrix of a pair of
        tunable nodes, else None (the conversion is part of the tunable end's node cost)."""
        auxiliary = f"{edge.value}@{edge.target_layout}"
        if auxiliary in self.auxiliary:
            if edge.src in self.assignment:
                return self.pair_cost(edge.src, auxiliary)
            return self.node_cost(auxiliary)
        if edge.src in self.assignment and edge.dst in self.assignment:
            return self.pair_cost(edge.src, edge.dst)
        return None


def _with_transform_costs(edges: list[ViewEdge], priced: _Pricing | None) -> list[ViewEdge]:
    sharing = Counter((edge.value, edge.target_layout) for edge in edges if edge.transform)
    out = []
    for edge in edges:
        if edge.transform:
            cost = priced.conversion(edge) if priced else None
            edge = ViewEdge(edge.src, edge.dst, edge.value, edge.source_layout, edge.target_layout, cost,
                            sharing[(edge.value, edge.target_layout)])
        out.append(edge)
    return out


def _producer(graph: OpGraph, value: str) -> str:
    """The op (not a follower) or model input whose output ``value`` is, through followers."""
    while True:
        try:
            op = graph.op(value)
        except SearchError:  # a model input
            return value
        if op.role != "follower":
            return value
        value = op.inputs[0]


def _value_shape(graph: OpGraph, value: str) -> tuple[int, ...]:
    inputs = dict(graph.inputs)
    return tuple(inputs[value]) if value in inputs else graph.op(value).shape


def _stored(graph: OpGraph, chosen: dict[str, Any], src: str, shape: tuple[int, ...]) -> str:
    """The layout ``src`` stores a value of logical ``shape`` in: its candidate's output layout for a tunable op."""
    if src in chosen and activation_shape(shape) is not None and not graph.op(src).layout_free:
        return chosen[src].out_layout
    return _fixed_layout(shape)


def _fixed_layout(shape: tuple[int, ...]) -> str:
    return fixed_layout(shape) if activation_shape(shape) is not None else ""


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def _about(op: Op) -> str:
    """``3x3/2 64>128`` for a tunable convolution (kernel, stride when not 1, channels in and out), ``1920>1000`` for
    a dense layer, the output channels for the others."""
    channels_in = op.input_shapes[0][1] if op.input_shapes and len(op.input_shapes[0]) >= 2 else None
    channels_out = op.shape[1] if len(op.shape) >= 2 else None
    if "kernel" in op.attrs:
        (kh, kw), stride = op.attrs["kernel"], op.attrs.get("strides", (1, 1))[0]
        return f"{kh}x{kw}{f'/{stride}' if stride != 1 else ''} {channels_in}>{channels_out}"
    if op.kind == "dense":
        return f"{channels_in}>{channels_out}"
    return "" if channels_out is None else f"{channels_out}"
