"""Which variables a Relax expression reads: shared by graph extraction and the ONNX rewriter."""

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
