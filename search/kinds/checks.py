"""The conformance suite of operator kinds: ``check_kind(kind)`` (as scikit-learn's ``check_estimator``).

A kernel kind is checked on small workloads (its ``examples`` unless given): every supported layout pair fits the
workload's shapes; the knob space is deterministic, distinct, sorted and has the default first (building ``()`` and
the first setting give the same PrimFunc); every knob setting of every layout pair (up to the caps given, or the
settings that hold every pair of knob values, ``settings="pairwise"``; the bf16 settings at least on each workload's
first pair) builds a scheduled PrimFunc whose parameters have the packed shapes, and computes what the kind's numpy
reference computes (``tolerance``), for every epilogue the kind lists; features, if the kind gives them, are finite
numbers and tell every knob setting of a layout pair from the others. A layout kind is run in every layout that fits
its example inputs against its numpy reference. ``kind_checks`` yields the checks one by one (the test suite
parametrises over them); ``check_kind`` runs them all and raises ``AssertionError`` naming the first failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from itertools import combinations
from typing import Any

import numpy as np

from search.errors import SearchError
from search.host import make_target
from search.kinds.base import KernelKind, LayoutKind, OperatorKind
from search.kinds.registry import kernel_kind
from search.layouts import BF16, layout, storage_of
from search.numerics import relative_error
from search.op import Op
from search.precision import INT8_TOLERANCE, precision_of
from search.precision import TOLERANCE as BF16_TOLERANCE
from search.templates.int8 import RANGE
from search.templates.workloads import Epilogue, KernelSpec

TOLERANCE = 1e-4  # of max|out - reference| relative to max(1, max|reference|), float32 against float64
Check = tuple[str, Callable[[], None]]
Knobs = tuple[tuple[str, int], ...]


def pairwise(space: Sequence[Knobs]) -> list[Knobs]:
    """The settings of ``space``, in its order, that together hold every pair of knob values (and every value) that
    some setting of it holds: all-pairs testing's cover, chosen greedily from the default (the first) on. A fault
    that needs two knobs' values together shows in it as in the whole space, at a fraction of the builds."""
    def pairs(knobs: Knobs) -> set[tuple]:
        items = sorted(knobs)
        return {*((item,) for item in items), *combinations(items, 2)}

    wanted, chosen = set().union(*map(pairs, space)), []
    while wanted:  # the default first, then the setting holding most pairs still wanted (ties: the space's order)
        best = max(space, key=lambda knobs: len(pairs(knobs) & wanted)) if chosen else space[0]
        chosen.append(best)
        wanted -= pairs(best)
    return sorted(chosen, key=list(space).index)


def _run(func, arrays: Sequence[np.ndarray], out_shape: tuple[int, ...], target) -> np.ndarray:
    """Compile ``func`` for ``target`` and run it on ``arrays`` into a NaN-filled output of ``out_shape`` (of the
    dtype of ``func``'s last parameter: float32, or bf16 bit patterns)."""
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target).jit()
    dev = tvm.cpu()
    dtypes = [str(param.dtype) for param in func.params]  # float32, or a packed bf16 weight's uint16
    args = [tvm.runtime.tensor(np.ascontiguousarray(a, dtype=dtype), dev) for a, dtype in zip(arrays, dtypes)]
    out = tvm.runtime.tensor(layout_nan(str(func.params[-1].dtype), out_shape), dev)
    lib["main"](*args, out)
    return out.numpy()


def _error(got: np.ndarray, expected: np.ndarray, what: str) -> float:
    assert got.shape == expected.shape, f"{what}: output shape {got.shape}, expected {expected.shape}"
    return relative_error([got], [expected], floor=1.0)


def _close(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    error = _error(got, expected, what)
    assert error <= TOLERANCE, f"{what}: relative error {error:.3g} against the numpy reference"


# ---------------------------------------------------------------------------------------------------- kernel kinds
def _workload_check(kind: KernelKind, workload: Any) -> None:
    assert getattr(workload, "kind", None) == kind.name, \
        f"{workload!r}: its kind is {getattr(workload, 'kind', None)!r}, not {kind.name!r}"
    assert isinstance(workload, kind.workload_type), f"{workload!r} is not a {kind.workload_type.__name__}"
    pairs = kind.supported_layouts(workload)
    assert pairs, f"{kind.name}: no layout pair for {workload!r}"
    assert len(set(pairs)) == len(pairs), f"{kind.name}: a layout pair is listed twice for {workload!r}"
    for in_layout, out_layout in pairs:
        spec = KernelSpec(workload, in_layout, out_layout, (), kind.epilogues[0])
        for name, shape in (*kind.activations(spec), kind.output(spec)):
            layout(name).check(shape)


def _space_check(kind: KernelKind, spec: KernelSpec, target) -> None:
    where = f"{kind.name} {spec.in_layout}>{spec.out_layout} on {spec.workload!r}"
    space = kind.knob_space(spec)
    assert space, f"{where}: empty knob space"
    assert space == kind.knob_space(spec), f"{where}: knob space not deterministic"
    assert len(set(space)) == len(space), f"{where}: a knob setting is listed twice"
    assert kind.knob_space(spec, 2) == space[:2], f"{where}: knob_space(size) is not the first settings"
    for knobs in space:
        assert all(isinstance(k, str) and isinstance(v, int) for k, v in knobs) and list(knobs) == sorted(knobs), \
            f"{where}: knobs {knobs} are not sorted (name, int) pairs"
    default, first = kind.build(replace(spec, knobs=()), target), kind.build(replace(spec, knobs=space[0]), target)
    assert default.script() == first.script(), f"{where}: the first knob setting is not the default"


def check_kernel(spec: KernelSpec, *, target=None, seed: int = 0) -> None:
    """Build ``spec`` with its kind, check the PrimFunc is scheduled and its parameters have the shapes of the data,
    the packed constants, the other activations (a residual) and the output, run it on random operands and compare
    with the kind's numpy reference; ``AssertionError`` on a difference."""
    _numerics_check(kernel_kind(spec.workload.kind), spec, target or make_target(1), seed)


def kernel_error(spec: KernelSpec, *, target=None, seed: int = 0) -> float:
    """``max|out - reference| / max(1, max|reference|)`` of ``spec``'s kernel on random operands against its kind's
    float64 numpy reference (what ``check_kernel`` compares with ``tolerance(spec)``); ``AssertionError`` if the
    PrimFunc is not scheduled or its parameters have the wrong shapes."""
    return _numerics(kernel_kind(spec.workload.kind), spec, target or make_target(1), seed)


def tolerance(spec: KernelSpec) -> float:
    """The largest relative error ``check_kernel`` accepts: ``TOLERANCE`` for fp32, ``search.precision``'s for
    bf16 (and for layouts of bf16 values) and int8."""
    stored = {storage_of(name) for name in (spec.in_layout, spec.out_layout)}
    precision = "bf16" if BF16 in stored else precision_of(spec.knobs)
    return {"fp32": TOLERANCE, "bf16": BF16_TOLERANCE, "int8": INT8_TOLERANCE}[precision]


def layout_nan(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """An array of ``shape`` filled with NaN: float32, or bf16's NaN as bit patterns (``uint16``)."""
    return np.full(shape, np.nan, np.float32) if dtype == "float32" else np.full(shape, 0x7FC0, dtype)


def _numerics_check(kind: KernelKind, spec: KernelSpec, target, seed: int) -> None:
    error = _numerics(kind, spec, target, seed)
    assert error <= tolerance(spec), f"{_where(kind, spec)}: relative error {error:.3g} against the numpy reference"


def _where(kind: KernelKind, spec: KernelSpec) -> str:
    return f"{kind.name} {spec.in_layout}>{spec.out_layout}:{dict(spec.knobs)} {spec.epilogue} on {spec.workload!r}"


def _numerics(kind: KernelKind, spec: KernelSpec, target, seed: int) -> float:
    where = _where(kind, spec)
    rng = np.random.default_rng(seed)
    wl, (out_layout, out_logical) = spec.workload, kind.output(spec)
    activations = kind.activations(spec)
    (_, data_shape), *others = activations
    data = rng.uniform(-1, 1, data_shape)
    params = kind.random_params(wl, spec.epilogue, rng)
    inputs = [data, *(rng.uniform(-1, 1, shape) for _, shape in others)]
    if precision_of(spec.knobs) == "int8":  # quantised over the ranges of its inputs, as calibration would find them
        params[RANGE] = np.array([bound for x in inputs[: kind.int8_inputs] for bound in (x.min(), x.max())])
    func = kind.build(spec, target)
    assert bool(func.attrs["tir.is_scheduled"]) and "global_symbol" not in func.attrs, \
        f"{where}: build must return a PrimFunc marked scheduled, without a global symbol"
    stored = [layout(name).from_logical(x) for (name, _), x in zip(activations, inputs)]
    arrays = [stored[0], *kind.pack(spec, params), *stored[1:]]
    out_shape = layout(out_layout).physical_shape(out_logical)
    shapes = [tuple(int(e) for e in p.shape) for p in func.params]
    assert shapes == [a.shape for a in arrays] + [out_shape], \
        f"{where}: parameters {shapes}, but data, packed constants, other activations and output are " \
        f"{[a.shape for a in arrays] + [out_shape]}"
    expected = kind.reference(spec, inputs, params)
    return _error(layout(out_layout).to_logical(_run(func, arrays, out_shape, target)), expected, where)


def _features_check(kind: KernelKind, spec: KernelSpec) -> None:
    try:
        values = kind.features(spec)
    except NotImplementedError:
        return
    bad = {k: v for k, v in values.items() if not (isinstance(k, str) and isinstance(v, float) and math.isfinite(v))}
    assert not bad, f"{kind.name}: features must be finite floats by name, got {bad}"
    seen: dict[tuple, Knobs] = {}
    for knobs in kind.knob_space(spec):
        try:
            row = tuple(sorted(kind.features(replace(spec, knobs=knobs)).items()))
        except NotImplementedError:  # a setting the cost model cannot price (measured only)
            continue
        assert row not in seen, (f"{kind.name}: the knob settings {dict(seen.get(row, ()))} and {dict(knobs)} of "
                                 f"{_where(kind, spec)} have the same features (a cost model cannot tell them apart)")
        seen[row] = knobs


def _kernel_checks(kind: KernelKind, workloads: Sequence[Any], epilogues: Sequence[Epilogue],
                   pairs: int | None, settings: int | str | None, target) -> Iterator[Check]:
    for index, wl in enumerate(workloads):
        yield f"workload{index}-layouts", lambda wl=wl: _workload_check(kind, wl)
        chosen = kind.supported_layouts(wl)
        if pairs is not None and len(chosen) > pairs:  # spread over the list: first, last and evenly between
            chosen = [chosen[round(i * (len(chosen) - 1) / max(pairs - 1, 1))] for i in range(pairs)]
        for place, (in_layout, out_layout) in enumerate(dict.fromkeys(chosen)):
            name = f"workload{index}-{in_layout}>{out_layout}"
            spec = KernelSpec(wl, in_layout, out_layout, (), epilogues[0])
            yield f"{name}-knob-space", lambda spec=spec: _space_check(kind, spec, target)
            yield f"{name}-features", lambda spec=spec: _features_check(kind, spec)

            def numerics(spec=spec, first=place == 0) -> None:
                full = kind.knob_space(spec)
                if settings == "pairwise":
                    space = pairwise(full)
                else:
                    space = [*full[:settings], *(k for k in full[settings:] if first and precision_of(k) != "fp32")]
                for i, knobs in enumerate(space):
                    for j, epilogue in enumerate(epilogues if i == 0 else epilogues[-1:]):
                        _numerics_check(kind, replace(spec, knobs=knobs, epilogue=epilogue), target, 1000 * i + j)

            yield f"{name}-numerics", numerics


# ---------------------------------------------------------------------------------------------------- layout kinds
def _layout_kind_check(kind: LayoutKind, shapes: Sequence[tuple[int, ...]], target) -> None:
    import tvm
    from tvm import relax

    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, shape) for shape in shapes]
    attrs = kind.example_attrs(shapes)
    expected = kind.reference(inputs, attrs)
    assert expected.shape == kind.output_shape(shapes, attrs), f"{kind.name}: output_shape is not the reference's"
    op = Op("node", kind.name, "tunable", tuple(f"x{i}" for i in range(len(shapes))), tuple(shapes), expected.shape,
            attrs, input_sides=("in",) * len(shapes))
    pairs = kind.layout_pairs(op)
    assert pairs, f"{kind.name}: no layout for inputs {shapes}"
    for name, out_name in pairs:
        assert name == out_name, f"{kind.name}: a layout kind has one layout, got {name}>{out_name}"
        stored = layout(name)
        assert stored.storage == "fp32" or kind.moves_values, f"{kind.name}: bf16 values in {name}, but it computes"
        params = [relax.Var(f"x{i}", relax.TensorType(stored.physical_shape(s), stored.dtype)) for i, s in
                  enumerate(shapes)]
        bb = relax.BlockBuilder()
        with bb.function("main", params):
            out = bb.emit(kind.emit(params, stored, attrs))
            bb.emit_func_output(out)
        vm = relax.VirtualMachine(tvm.compile(bb.get(), target=target), tvm.cpu())
        held = [stored.from_logical(x).astype(stored.dtype) for x in inputs]
        result = stored.to_logical(vm["main"](*(tvm.runtime.tensor(x, tvm.cpu()) for x in held)).numpy())
        if stored.storage == "fp32":
            _close(result, expected, f"{kind.name} in {name} on {shapes}")
        else:  # the values' bits moved: exactly the reference on the values as stored
            assert np.array_equal(result, kind.reference([stored.to_logical(x) for x in held], attrs)), (
                f"{kind.name} in {name} on {shapes}: bf16 values not moved exactly")
        in_layout, out_layout = kind.baseline(op, name)
        assert (in_layout, out_layout) in pairs, f"{kind.name}: baseline {in_layout}>{out_layout} is not a pair"


# ---------------------------------------------------------------------------------------------------- entry points
def kind_checks(
    kind: OperatorKind,
    examples: Sequence[Any] | None = None,
    *,
    epilogues: Sequence[Epilogue] | None = None,
    pairs: int | None = None,
    settings: int | str | None = None,
    target=None,
) -> Iterator[Check]:
    """The checks of ``kind`` as ``(name, callable)`` pairs; each callable raises ``AssertionError`` (or the kind's
    own error) on a violation.

    Parameters
    ----------
    kind : OperatorKind
        The kind (registered or not).
    examples : sequence, optional
        Kernel kinds: workloads; layout kinds: lists of input shapes. Default: the kind's ``examples``.
    epilogues : sequence of Epilogue, optional
        Kernel kinds: epilogues to run the default knobs with (the last one also runs every other setting).
        Default: the kind's ``epilogues``.
    pairs, settings : int, optional
        Caps on the layout pairs per workload (spread over the list) and the knob settings per pair (the first ones);
        None checks them all. ``settings="pairwise"``: the settings that hold every pair of knob values
        (``pairwise``).
    target : tvm.target.Target, optional
        Default: the host CPU, one core.
    """
    if isinstance(settings, str) and settings != "pairwise":
        raise SearchError(f"settings must be a number, None or 'pairwise', got {settings!r}")
    target = target or make_target(1)
    examples = kind.examples if examples is None else examples
    if not examples:
        raise SearchError(f"{kind.name}: no examples to check; pass some or set the kind's examples")
    if isinstance(kind, KernelKind):
        yield from _kernel_checks(kind, examples, epilogues or kind.epilogues, pairs, settings, target)
    elif isinstance(kind, LayoutKind):
        for index, shapes in enumerate(examples):
            yield f"example{index}-layouts", lambda shapes=shapes: _layout_kind_check(kind, shapes, target)
    else:
        raise SearchError(f"{kind!r} is neither a kernel kind nor a layout kind")


def check_kind(kind: OperatorKind, examples: Sequence[Any] | None = None, **options: Any) -> None:
    """Run every check of ``kind_checks(kind, examples, **options)``; ``AssertionError`` names the first failure.

    Examples
    --------
    >>> from search.kinds import KINDS, check_kind
    >>> check_kind(KINDS["dense"], pairs=1, settings=2)  # doctest: +SKIP
    """
    for name, check in kind_checks(kind, examples, **options):
        try:
            check()
        except AssertionError as exc:
            raise AssertionError(f"{kind.name}: check {name} failed: {exc}") from exc
