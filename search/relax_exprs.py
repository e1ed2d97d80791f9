"""Questions about Relax expressions (what they read, their static shape), shared by extraction, the zoo and ONNX."""

from __future__ import annotations

from tvm import relax


def var_reads(expr) -> list[relax.Var]:
    """The variables ``expr`` reads (call arguments and tuple fields, recursively), once per read, in order."""
    if isinstance(expr, relax.Var):
        return [expr]
    if isinstance(expr, relax.Tuple):
        return [v for item in expr.fields for v in var_reads(item)]
    if isinstance(expr, relax.Call):
        return [v for arg in expr.args for v in var_reads(arg)]
    if isinstance(expr, relax.TupleGetItem):
        return var_reads(expr.tuple_value)
    return []


def static_shape(expr) -> tuple[int, ...] | None:
    """The static shape of a tensor-typed expression; None if it is no tensor or its shape is unknown or dynamic."""
    ty = expr.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    try:
        return tuple(int(d) for d in ty.shape.values)
    except TypeError:
        return None
