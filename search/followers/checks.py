"""The conformance suite of a follower kind (as ``search.kinds.check_kind`` is for operator kinds): each form it writes
(``FollowerKind.written``) is recognised again by its own ``match`` with the same attributes and constants, it
computes the same in every layout a producer may write and, for an activation, within its ``tolerance`` of its numpy
reference (its vectorised form, as emitted and as a kernel epilogue runs it, over a wide range of inputs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np

from search.followers.base import ActivationKind, FollowerKind, FollowerMatch
from search.layouts import layout
from search.op import Op

LAYOUTS = ("NCHW", "NHWC", "NCHW16c")
SHAPE = (1, 16, 7, 7)
TOLERANCE = 1e-5  # of max|out - NCHW's| relative to max(1, max|NCHW's|): float32 in another order of operations
Check = tuple[str, Callable[[], None]]


def _op(kind: FollowerKind, found: FollowerMatch, shape: tuple[int, ...]) -> Op:
    return Op("f", kind.name, "follower", ("x",), (shape,), (), dict(found.attrs), dict(found.params))


def _module(write: Callable, stored: str, shape: tuple[int, ...]):
    """``main(x)``: ``write(x)`` of ``x`` stored in ``stored``."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(layout(stored).physical_shape(shape), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(write(x))
        bb.emit_func_output(out)
    return bb.get()


def _emitted(kind: FollowerKind, op: Op, stored: str, shape: tuple[int, ...]):
    return _module(lambda x: kind.emit(op, x, stored), stored, shape)


def _same(found, written) -> bool:
    """Attribute values equal (numbers: up to float32 rounding of the constants written)."""
    try:
        return bool(np.allclose(np.asarray(found, dtype=float), np.asarray(written, dtype=float), rtol=1e-6))
    except (TypeError, ValueError):
        return found == written


def _recognised(kind: FollowerKind, example: FollowerMatch, shape: tuple[int, ...]) -> None:
    from tvm import relax

    from search.bindings import Bindings

    op = _op(kind, example, shape)
    for number in range(len(kind.written(op, relax.Var("x", relax.TensorType(shape, "float32"))))):
        bindings = Bindings(_module(lambda x, number=number: kind.written(op, x)[number], "NCHW", shape)["main"])
        found = kind.match(bindings, 0, shape)
        where = f"form {number + 1}"
        assert found is not None, f"{where}: not recognised at its first binding"
        assert found.claims == tuple(range(1, len(bindings))), f"{where}: claims {found.claims}, not the rest"
        assert found.attrs.keys() == example.attrs.keys() and all(
            _same(found.attrs[key], value) for key, value in example.attrs.items()), \
            f"{where}: attributes {found.attrs} recognised, {example.attrs} written"
        assert found.params.keys() == example.params.keys() and all(
            np.array_equal(found.params[key], example.params[key]) for key in example.params), \
            f"{where}: constants differ"


def _same_in_every_layout(kind: FollowerKind, example: FollowerMatch, shape: tuple[int, ...], target) -> None:
    import tvm
    from tvm import relax

    op = _op(kind, example, shape)
    data = np.random.default_rng(0).uniform(-4, 4, shape).astype("float32")
    outputs = {}
    for stored in LAYOUTS:
        try:
            vm = relax.VirtualMachine(tvm.compile(_emitted(kind, op, stored, shape), target=target), tvm.cpu())
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


def _close_to_numpy(kind: ActivationKind, example: FollowerMatch, target) -> None:
    import tvm
    from tvm import relax

    data = np.concatenate([np.linspace(-30, 30, 6001), np.random.default_rng(0).standard_normal(4000) * 4])
    data = data.astype("float32").reshape(1, -1, 1, 1)
    op = _op(kind, example, data.shape)
    vm = relax.VirtualMachine(tvm.compile(_emitted(kind, op, "NCHW", data.shape), target=target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(data, tvm.cpu())).numpy().astype("float64")
    reference = kind.numpy(data.astype("float64"), dict(example.attrs))
    error = np.abs(out - reference) / np.maximum(1.0, np.abs(reference))
    worst = int(np.argmax(error))
    assert error.flat[worst] <= kind.tolerance, \
        f"error {error.flat[worst]:.3g} at x = {data.flat[worst]:.6g} above its tolerance {kind.tolerance:.3g}"


def follower_checks(kind: FollowerKind, shape: tuple[int, ...] = SHAPE, target=None) -> Iterator[Check]:
    """The checks of ``kind`` as ``(name, callable)`` pairs on its ``example`` for a value of ``shape``."""
    from search.host import make_target

    example = kind.example(shape, np.random.default_rng(0))
    yield "recognised as emitted", partial(_recognised, kind, example, shape)
    target = target or make_target(1)
    yield "the same in every layout", partial(_same_in_every_layout, kind, example, shape, target)
    if isinstance(kind, ActivationKind):
        yield "within its tolerance of numpy", partial(_close_to_numpy, kind, example, target)


def check_follower(kind: FollowerKind, shape: tuple[int, ...] = SHAPE, target=None) -> None:
    """Run every check of ``follower_checks``; ``AssertionError`` names the kind and the first failing check."""
    for name, check in follower_checks(kind, shape, target):
        try:
            check()
        except AssertionError as exc:
            raise AssertionError(f"{kind.name}: check {name} failed: {exc}") from exc
