"""The conformance suite of a follower kind (as ``search.kinds.check_kind`` is for operator kinds): what it emits is
recognised again by its own ``match`` with the same attributes and constants, and it computes the same in every
layout a producer may write."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np

from search.followers.base import FollowerKind, FollowerMatch
from search.layouts import layout
from search.op import Op

LAYOUTS = ("NCHW", "NHWC", "NCHW16c")
SHAPE = (1, 16, 7, 7)
TOLERANCE = 1e-5  # of max|out - NCHW's| relative to max(1, max|NCHW's|): float32 in another order of operations
Check = tuple[str, Callable[[], None]]


def _op(kind: FollowerKind, found: FollowerMatch, shape: tuple[int, ...]) -> Op:
    return Op("f", kind.name, "follower", ("x",), (shape,), (), dict(found.attrs), dict(found.params))


def _module(kind: FollowerKind, op: Op, stored: str, shape: tuple[int, ...]):
    """``main(x)``: the follower of ``x`` stored in ``stored``."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(layout(stored).physical_shape(shape), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(kind.emit(op, x, stored))
        bb.emit_func_output(out)
    return bb.get()


def _recognised(kind: FollowerKind, example: FollowerMatch, shape: tuple[int, ...]) -> None:
    from search.bindings import Bindings

    bindings = Bindings(_module(kind, _op(kind, example, shape), "NCHW", shape)["main"])
    found = next((kind.match(bindings, index, shape) for index in range(len(bindings))), None)
    assert found is not None, "its own emitted NCHW expression is not recognised"
    assert found.attrs == example.attrs, f"attributes {found.attrs} recognised, {example.attrs} emitted"
    assert found.params.keys() == example.params.keys() and all(
        np.array_equal(found.params[key], example.params[key]) for key in example.params), "constants differ"


def _same_in_every_layout(kind: FollowerKind, example: FollowerMatch, shape: tuple[int, ...], target) -> None:
    import tvm
    from tvm import relax

    op = _op(kind, example, shape)
    data = np.random.default_rng(0).uniform(-4, 4, shape).astype("float32")
    outputs = {}
    for stored in LAYOUTS:
        try:
            vm = relax.VirtualMachine(tvm.compile(_module(kind, op, stored, shape), target=target), tvm.cpu())
            result = vm["main"](tvm.runtime.tensor(layout(stored).from_logical(data), tvm.cpu())).numpy()
        except Exception as exc:  # a kind that cannot run in a layout fails the check, naming the layout
            message = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
            raise AssertionError(f"{stored}: {type(exc).__name__}: {message}") from exc
        outputs[stored] = layout(stored).to_logical(result)
    reference = outputs[LAYOUTS[0]]
    for stored, out in outputs.items():
        assert out.shape == reference.shape, f"{stored}: shape {out.shape}, NCHW gives {reference.shape}"
        error = float(np.max(np.abs(out - reference))) / max(1.0, float(np.max(np.abs(reference))))
        assert error <= TOLERANCE, f"{stored}: relative error {error:.3g} against NCHW"


def follower_checks(kind: FollowerKind, shape: tuple[int, ...] = SHAPE, target=None) -> Iterator[Check]:
    """The checks of ``kind`` as ``(name, callable)`` pairs on its ``example`` for a value of ``shape``."""
    from search.host import make_target

    example = kind.example(shape, np.random.default_rng(0))
    yield "recognised as emitted", partial(_recognised, kind, example, shape)
    yield "the same in every layout", partial(_same_in_every_layout, kind, example, shape, target or make_target(1))


def check_follower(kind: FollowerKind, shape: tuple[int, ...] = SHAPE, target=None) -> None:
    """Run every check of ``follower_checks``; ``AssertionError`` names the kind and the first failing check."""
    for name, check in follower_checks(kind, shape, target):
        try:
            check()
        except AssertionError as exc:
            raise AssertionError(f"{kind.name}: check {name} failed: {exc}") from exc
