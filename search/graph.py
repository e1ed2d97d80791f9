"""The operator graph tessera searches over, extracted from a Relax module.

One ``Op`` per operator that matters for layouts. Three roles:

- **tunable** ops, recognised by a registered operator kind (``search.kinds``), get a layout (and a kernel schedule)
  from the plan: built in, ``conv2d`` / ``depthwise_conv2d`` and ``dense`` with their fused epilogue (bias, residual
  add, relu / relu6 / gelu; the residual is an extra input), and ``concat`` / ``add`` of 4-D activations
  (multi-input nodes: every input edge converts on its own);
- **follower** ops (relu, clip, sigmoid, per-channel multiply/add of a constant, pooling) run in the layout of
  their producer;
- **fixed** ops, every other operator (reshape, softmax, non-channel concats, grouped convolutions, operators tessera
  knows nothing of, ``call_tir`` of the module's own PrimFuncs, tuples and their items), run as TVM compiles them, in
  plain NCHW, as do the model inputs/outputs.

Layout edges join two tunable ops through follower chains and carry activations: 4-D ones, and the rows of linear
layers (2-D, or 3-D viewed as (batch x tokens, features): ``search.layouts.activation_shape``), stored ``NC`` by
fixed ops; ops of a layout-free kind (``batch_matmul``) count as fixed ops here, as their tensors are no activations.
Tunable ops that read from or write to a fixed op / model boundary are listed as boundary reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from search.errors import SearchError
from search.layouts import activation_shape
from search.op import Op


@dataclass(frozen=True)
class LayoutEdge:
    """An activation flowing from tunable op ``src`` (through followers) into input ``dst_input`` of ``dst``.

    ``dst_side`` says which layout of ``dst`` the tensor must arrive in (``in``, or ``out`` for a residual); ``shape``
    is the logical shape of the tensor at ``dst`` (after the followers): NCHW, or (rows, features).
    """

    src: str
    dst: str
    dst_input: int
    dst_side: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class BoundaryRead:
    """Input ``input`` of tunable op ``node`` reads a fixed NCHW (or NC) tensor of logical ``shape`` (model input,
    fixed op)."""

    node: str
    input: int
    side: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class BoundaryWrite:
    """Tunable op ``node``'s output (through followers, logical ``shape``), read as the value ``value``, reaches a
    fixed op or a model output (``consumer``)."""

    node: str
    consumer: str
    shape: tuple[int, ...]
    value: str


@dataclass(frozen=True)
class Read:
    """One read of a layout-managed value: by tunable ``node``, arriving in its ``side`` (``in`` / ``out``) layout, or
    by a fixed op or model output (``node`` None), which reads NCHW."""

    node: str | None
    side: str = ""


@dataclass(frozen=True)
class LayoutValue:
    """An activation whose layout a plan decides (the one its ``producer`` stores it in; None: a fixed NCHW value, a
    model input or a fixed op's output) and every read of it by a node that may want another layout."""

    name: str
    producer: str | None
    shape: tuple[int, ...]
    reads: tuple[Read, ...]


@dataclass(frozen=True, eq=False)
class OpGraph:
    """All ops in topological order, model inputs/outputs, layout edges and boundary reads/writes.

    ``input_dtypes`` are the inputs' dtypes (float32, or an integer type for index inputs such as token ids);
    ``module`` is the Relax module the graph came from (the numerical reference at export).
    """

    ops: tuple[Op, ...]
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[str, ...]
    output_is_tuple: bool
    edges: tuple[LayoutEdge, ...]
    boundary_reads: tuple[BoundaryRead, ...]
    boundary_writes: tuple[BoundaryWrite, ...]
    input_dtypes: tuple[str, ...]
    module: Any = field(default=None, repr=False)
    _by_name: dict[str, Op] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {op.name: op for op in self.ops})

    def op(self, name: str) -> Op:
        """The op called ``name``; SearchError if there is none."""
        if name not in self._by_name:
            raise SearchError(f"graph has no op named {name!r}")
        return self._by_name[name]

    @property
    def tunable(self) -> tuple[Op, ...]:
        """Tunable ops in topological order."""
        return tuple(op for op in self.ops if op.role == "tunable")

    def source(self, value: str) -> str | None:
        """The tunable op whose layout ``value`` is stored in (following followers up), or None for fixed NCHW."""
        return _source(self._by_name, value)

    def followers_of(self, name: str) -> tuple[Op, ...]:
        """The followers that run right after op ``name`` in its layout, each the only reader of the value before
        it (as FuseOps fuses them with it); stops at a value read twice or by a model output."""
        readers: dict[str, list[Op]] = {}
        for op in self.ops:
            for value in dict.fromkeys(op.inputs):
                readers.setdefault(value, []).append(op)
        chain, value = [], name
        while value not in self.outputs and len(readers.get(value, [])) == 1 and readers[value][0].role == "follower" \
                and readers[value][0].inputs.count(value) == 1:
            chain.append(readers[value][0])
            value = chain[-1].name
        return tuple(chain)

    def layout_values(self) -> list[LayoutValue]:
        """Every value a tunable node reads, or a tunable node's value a fixed op or output reads, with all its reads
        (in order of first appearance). The exported module converts a value once per layout it is read in."""
        found: dict[str, tuple[str | None, tuple[int, ...], list[Read]]] = {}

        def add(value: str, producer: str | None, shape: tuple[int, ...], read: Read) -> None:
            found.setdefault(value, (producer, tuple(shape), []))[2].append(read)

        for edge in self.edges:
            add(self.op(edge.dst).inputs[edge.dst_input], edge.src, edge.shape, Read(edge.dst, edge.dst_side))
        for read in self.boundary_reads:
            add(self.op(read.node).inputs[read.input], None, read.shape, Read(read.node, read.side))
        for write in self.boundary_writes:
            add(write.value, write.node, write.shape, Read(None))
        return [LayoutValue(name, producer, shape, tuple(reads)) for name, (producer, shape, reads) in found.items()]


def _source(by_name: dict[str, Op], value: str) -> str | None:
    while value in by_name and by_name[value].role == "follower":
        value = by_name[value].inputs[0]
    op = by_name.get(value)
    return op.name if op is not None and op.role == "tunable" and not op.layout_free else None


def _connect(ops: list[Op], outputs: list[str]) -> tuple[list[LayoutEdge], list[BoundaryRead], list[BoundaryWrite]]:
    """Layout edges between tunable ops, and their reads from / writes to fixed NCHW (NC) tensors: of activations
    only."""
    by_name = {op.name: op for op in ops}
    edges, reads, writes = [], [], []
    for op in ops:
        for index, (value, graph_shape) in enumerate(zip(op.inputs, op.input_shapes)):
            src, shape = _source(by_name, value), activation_shape(graph_shape)
            if shape is None or op.role == "follower":
                continue
            if op.role == "fixed" or op.layout_free:
                writes.extend([BoundaryWrite(src, op.name, shape, value)] if src else [])
            elif src is None:
                reads.append(BoundaryRead(op.name, index, op.input_sides[index], shape))
            else:
                edges.append(LayoutEdge(src, op.name, index, op.input_sides[index], shape))
    for value in outputs:
        src = _source(by_name, value)
        shape = activation_shape(by_name[value].shape) if value in by_name else None
        if src is not None and shape is not None:
            writes.append(BoundaryWrite(src, "output", shape, value))
    return edges, reads, writes


def extract_graph(mod) -> OpGraph:
    """Build the ``OpGraph`` of ``mod["main"]``.

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module in NCHW/OIHW with constant weights (see ``search.zoo``).

    Raises
    ------
    SearchError
        For an operator outside the vocabulary (message names the op and its binding), non-constant weights, dynamic
        shapes, grouped (non-depthwise) convolutions, or non-NCHW layouts.
    """
    from search.graph_extract import extract_ops

    ops, inputs, outputs, output_is_tuple, dtypes = extract_ops(mod)
    edges, reads, writes = _connect(ops, outputs)
    return OpGraph(tuple(ops), tuple(inputs), tuple(outputs), output_is_tuple, tuple(edges), tuple(reads),
                   tuple(writes), tuple(dtypes), mod)
