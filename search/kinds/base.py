"""The interface behind which tessera knows an operator it can tune: one ``OperatorKind`` per kind of operator.

A kind answers every question the rest of tessera asks about its operator: how to recognise it in a Relax function
(``match``), which (input, output) layout pairs it can run in, which layout each of its inputs must arrive in, and its
uniform-baseline layouts. Two families:

- a ``KernelKind`` runs as a scheduled template kernel of its own: it also gives the workload, the knob space (default
  first), the scheduled PrimFunc, the constant arguments packed for it, the cost-model features and a numpy reference;
- a ``LayoutKind`` (concat, add, channel slice and gate) has no kernel: it computes in whatever layout the plan gives
  it, with TVM's own lowering; one that only moves values (concat, channel slice) also runs on the bf16 values that
  bf16 kernels read and write, as their bit patterns.

Kinds are stateless; ``search.kinds.register`` adds one to the registry by name, and ``search.kinds.check_kind`` is the
conformance suite every kind passes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from search.errors import SearchError
from search.layouts import BF16, Layout, candidate_layouts, layout, nearest_layout, stored_as
from search.templates.workloads import Epilogue, KernelSpec, Knobs

if TYPE_CHECKING:
    import tvm
    from tvm import relax

    from search.bindings import Bindings
    from search.op import Op


@dataclass(frozen=True)
class Match:
    """What a kind recognised: the bindings it replaces (the one binding its output last), the activations it reads
    (Relax variables, in argument order), its attributes and its constant operands."""

    parts: tuple[int, ...]
    inputs: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Conversion:
    """A layout transform export runs around a layout-free kernel: of its input ``input`` (None: its result), of
    logical ``shape``, from layout ``src`` to ``dst``."""

    input: int | None
    shape: tuple[int, ...]
    src: str
    dst: str


class OperatorKind(ABC):
    """One kind of tunable operator.

    Attributes
    ----------
    name : str
        The registry key, the ``kind`` of the graph's ``Op`` records and (for kernels) of the cost cache's keys.
    absorbs : bool
        Whether a match takes bindings after the operator (an epilogue). Such kinds are matched first, the latest
        operator first, so that of two operators that could absorb one binding the later takes it.
    examples : tuple
        What the conformance suite runs the kind on when given nothing else (``check_kind(kind)``): workloads of a
        kernel kind, tuples of input shapes of a layout kind.
    layout_free : bool
        Whether the op's tensors are plain logical arrays rather than NCHW activations, whatever their rank (an
        attention matmul's (batch, heads, tokens, size)). The plan decides no layout for them: the graph gives the op
        no layout edges, boundary reads or writes, it reads and writes its values as a fixed op does (4-D ones in
        NCHW order, which is their logical order); its layout pairs name how the kernel reads and writes them, and
        export converts between the two (a kernel kind's ``stored_layouts`` and ``conversions``).
    """

    name: ClassVar[str]
    absorbs: ClassVar[bool] = False
    layout_free: ClassVar[bool] = False
    examples: ClassVar[tuple[Any, ...]] = ()

    @abstractmethod
    def match(self, bindings: Bindings, index: int) -> Match | None:
        """The match of this kind's operator at binding ``index``, or None (then another kind, or none, takes it)."""

    @abstractmethod
    def layout_pairs(self, op: Op) -> list[tuple[str, str]]:
        """The (input layout, output layout) pairs ``op`` can run in, best guess first."""

    def input_sides(self, match: Match) -> tuple[str, ...]:
        """Which of the node's layouts each input arrives in: ``in`` or ``out`` (default: all ``in``)."""
        return ("in",) * len(match.inputs)

    def baseline(self, op: Op, name: str) -> tuple[str, str]:
        """The (input, output) layouts of a uniform plan in layout ``name``: on each side ``name``, or where its block
        does not divide the channels the largest smaller block that does, else NCHW."""
        return nearest_layout(name, op.input_shapes[0][1]), nearest_layout(name, op.shape[1])

    def __repr__(self) -> str:
        return f"<kind {self.name}>"


IN_PLACE = "in_place"  # the setting of a layout-kind node whose producers write straight into its output
COPIED, VIEWS, VIEW_OF = "copied", "views", "view_of"  # the attributes of a concat family in place (search.in_place)


def needs_prefix(op: Op) -> bool:
    """Whether ``op`` runs in place only where a channel prefix is contiguous: a view or an owner with views."""
    return bool(op.attrs.get(VIEWS) or op.attrs.get(VIEW_OF))



class LayoutKind(OperatorKind):
    """A kind without a kernel of its own: one layout for its inputs and its output, lowered by TVM.

    ``in_place``: whether the op's output can be the inputs laid side by side along the channels (concat), so that
    producers that are kernels can write straight into their slices of it. ``attributes``: the names of the op's
    attributes (``Match.attrs``) that say what it computes, given to ``emit`` and ``reference`` and part of the
    cost-cache keys of the chains that run it. ``moves_values``: whether the op only moves values (no arithmetic), so
    that it runs on bf16 values as their bit patterns, exactly (``with_bf16_values``).
    """

    in_place: ClassVar[bool] = False
    attributes: ClassVar[tuple[str, ...]] = ()
    moves_values: ClassVar[bool] = False

    def variants(self, op: Op, stored: str) -> list[Knobs]:
        """The node's settings in layout ``stored`` besides the layout: ``()``, the op computes its output; then,
        where the kind is ``in_place`` and the graph marked the op (``search.in_place.mark_in_place``),
        ``(("in_place", 1),)``: its producers write into their slices (a view: of its owner's output, which it is
        the start of) - in a concat family with views only where a channel prefix is the start of the memory."""
        possible = self.in_place and op.attrs.get(IN_PLACE) and (
            not needs_prefix(op) or layout(stored).prefix_contiguous(op.shape))
        return [()] + ([((IN_PLACE, 1),)] if possible else [])

    def layout_pairs(self, op: Op) -> list[tuple[str, str]]:
        """Every activation layout that fits the output and every input (as ``(layout, layout)``)."""
        shapes = (op.shape, *op.input_shapes)
        return self.with_bf16_values([(name, name) for name in candidate_layouts(op.shape[1])
                                      if all(layout(name).fits(s) for s in shapes)])

    def with_bf16_values(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``pairs``, then, where the kind ``moves_values`` and this host has bf16 kernels, the bf16 twin of each one
        whose channel block is one of the bf16 values kernels read and write (``NCHW32c.bf16``, ``NCHW16c.bf16``)."""
        from search.precision import bf16_settings
        from search.templates.bf16 import VALUE_BLOCKS

        if not (self.moves_values and bf16_settings()):
            return pairs
        return pairs + [(stored_as(i, BF16), stored_as(o, BF16)) for i, o in pairs if layout(i).block() in VALUE_BLOCKS]

    def baseline(self, op: Op, name: str) -> tuple[str, str]:
        shared = nearest_layout(name, op.shape[1], *(shape[1] for shape in op.input_shapes))
        return shared, shared

    def output_shape(self, shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> tuple[int, ...]:
        """The logical shape of the op's value on inputs of logical ``shapes`` (default: the first input's)."""
        return tuple(shapes[0])

    def example_attrs(self, shapes: Sequence[tuple[int, ...]]) -> dict[str, Any]:
        """The ``attributes`` of a typical op on inputs of ``shapes``, for the conformance suite (default: none)."""
        return {}

    @abstractmethod
    def emit(self, inputs: Sequence[relax.Expr], stored: Layout, attrs: Mapping[str, Any]) -> relax.Expr:
        """The Relax expression computing the op (of attributes ``attrs``) on ``inputs``, all stored (and the result
        stored) in ``stored``."""

    @abstractmethod
    def reference(self, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        """The numpy result on logical inputs."""


class KernelKind(OperatorKind):
    """A kind that runs as a scheduled template kernel.

    The kernel's arguments are ``data`` (in the input layout), the constant arrays ``pack`` returns, the other
    activations ``activations`` lists (by default the residual, in the output layout, when the epilogue adds one), and
    the output (in the output layout).

    Attributes
    ----------
    workload_type : type
        The frozen dataclass of its workloads (rebuilt from cache keys by the cost model).
    epilogues : tuple of Epilogue
        The epilogues the conformance suite checks the kernel with.
    prologue : bool
        Whether its template builds kernels with a prologue: a pre-activation (``Epilogue.prologue``; its ``pack``
        then appends the prologue's ``scale`` and ``shift`` to the constants) or a gate (``Epilogue.gate``; its
        ``activations`` then list the gate after the data).
    """

    absorbs: ClassVar[bool] = True
    workload_type: ClassVar[type]
    epilogues: ClassVar[tuple[Epilogue, ...]] = (Epilogue(),)
    prologue: ClassVar[bool] = False

    # ------------------------------------------------------------------------------------------------ from the graph
    @abstractmethod
    def workload(self, op: Op) -> Any:
        """The template workload of ``op`` (a frozen dataclass whose ``kind`` is this kind's name)."""

    def epilogue(self, op: Op) -> Epilogue:
        """The elementwise work ``op`` absorbed (bias, residual, activation, prologue or gate)."""
        a = op.attrs
        return Epilogue(bool(a.get("bias", False)), bool(a.get("residual", False)), a.get("activation"),
                        bool(a.get("prologue", False)), tuple(a.get("activation_attrs", {}).items()),
                        bool(a.get("gate", False)), bool(a.get("residual_after_activation", False)))

    def spec(self, op: Op, in_layout: str, out_layout: str, knobs: Knobs = ()) -> KernelSpec:
        """The kernel running ``op`` in the given layouts with ``knobs``."""
        return KernelSpec(self.workload(op), in_layout, out_layout, tuple(knobs), self.epilogue(op))

    def input_sides(self, match: Match) -> tuple[str, ...]:
        sides = ("in",) * len(match.inputs)
        return sides[:-1] + ("out",) if match.attrs.get("residual") else sides

    def layout_pairs(self, op: Op) -> list[tuple[str, str]]:
        return self.supported_layouts(self.workload(op))

    # ------------------------------------------------------------------------------------------------ the template
    @abstractmethod
    def supported_layouts(self, workload: Any) -> list[tuple[str, str]]:
        """The (input, output) layout pairs the template builds for ``workload``."""

    @abstractmethod
    def in_shape(self, workload: Any) -> tuple[int, ...]:
        """Logical shape of the data input."""

    @abstractmethod
    def out_shape(self, workload: Any) -> tuple[int, ...]:
        """Logical shape of the output (and of the residual)."""

    def activations(self, spec: KernelSpec) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """The kernel's activation arguments in order, each as (the layout it is stored in, its logical shape): the
        data in the input layout, then the residual (in the output layout) when the epilogue adds one."""
        data = (spec.in_layout, tuple(self.in_shape(spec.workload)))
        residual = (spec.out_layout, tuple(self.out_shape(spec.workload)))
        return (data, residual) if spec.epilogue.residual else (data,)

    def output(self, spec: KernelSpec) -> tuple[str, tuple[int, ...]]:
        """The kernel's output argument as (the layout it is stored in, its logical shape)."""
        return spec.out_layout, tuple(self.out_shape(spec.workload))

    int8_inputs = 1
    """How many of an op's activation inputs (the first ones) its int8 kernels quantise, each over its own range."""

    def int8_capable(self, op: Op) -> bool:
        """Whether the template has int8 settings for ``op``: its kernels then read the ranges of their first
        ``int8_inputs`` inputs from ``op.params`` (``search.templates.int8.RANGE``, found on calibration inputs).
        Default: no int8 kernel."""
        return False

    # ------------------------------------------------------------------------------------------------ layout-free
    def stored_layouts(self, op: Op) -> tuple[tuple[str, ...], str]:
        """For a layout-free op: the layout each input value stores the kernel's logical operand in, and the layout
        the op's value stores its result in. Default ``NCHW`` (values reshaped to the logical shape)."""
        return ("NCHW",) * len(op.inputs), "NCHW"

    def conversions(self, op: Op, spec: KernelSpec) -> list[Conversion]:
        """For a layout-free op run as ``spec``: the layout transforms export runs around the kernel, for each
        operand stored otherwise than the kernel reads it and for a result written otherwise than stored."""
        stored, result = self.stored_layouts(op)
        moves = [Conversion(i, shape, have, want)
                 for i, (have, (want, shape)) in enumerate(zip(stored, self.activations(spec), strict=True))
                 if have != want]
        written, shape = self.output(spec)
        return moves + ([Conversion(None, shape, written, result)] if written != result else [])

    @abstractmethod
    def knob_space(self, spec: KernelSpec, size: int | None = None) -> list[Knobs]:
        """Knob settings for ``spec``'s workload and layouts (its own knobs ignored), the default first, at most
        ``size``."""

    @abstractmethod
    def build(self, spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
        """The scheduled PrimFunc (marked scheduled, no global symbol); ``SearchError`` for what it cannot build."""

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The op's constant operands (as the graph holds them) laid out as ``build``'s constant arguments (by
        default none: a kind whose op has constant operands overrides this and ``random_params``)."""
        return []

    def random_params(self, workload: Any, epilogue: Epilogue, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random constant operands as the graph would hold them, for the conformance suite (by default none)."""
        return {}

    @abstractmethod
    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        """The numpy (float64) result in logical layout on the logical ``activations`` (data first)."""

    def features(self, spec: KernelSpec) -> dict[str, float]:
        """Cost-model features of the kernel (names of ``cost_models.features.FEATURE_NAMES``); a kind without
        them cannot be priced by the learned model (its tasks are recorded as failures there)."""
        raise NotImplementedError(f"kind {self.name} gives no cost-model features")

    # ------------------------------------------------------------------------------------------------ checks
    def check_spec(self, spec: KernelSpec) -> None:
        """``SearchError`` unless the template builds ``spec``'s layouts (and its prologue)."""
        if spec.epilogue.reads_through and not self.prologue:
            raise SearchError(f"{self.name} kernels have no prologue")
        if (spec.in_layout, spec.out_layout) not in self.supported_layouts(spec.workload):
            raise SearchError(f"no {self.name} kernel for layouts {spec.in_layout} -> {spec.out_layout} on "
                              f"{spec.workload}")


class TemplateKind(KernelKind):
    """A kernel kind whose layouts, knob space and PrimFunc come from one template module, its ``template`` (with
    ``supported_layouts(workload)``, ``knob_space(spec, size)`` and ``build(spec, target)``, as in
    ``search.templates``)."""

    template: ClassVar[Any]

    def supported_layouts(self, workload: Any) -> list[tuple[str, str]]:
        return self.template.supported_layouts(workload)

    def knob_space(self, spec: KernelSpec, size: int | None = None) -> list[Knobs]:
        self.check_spec(spec)
        return self.template.knob_space(spec, size)

    def build(self, spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
        self.check_spec(spec)
        return self.template.build(spec, target)
