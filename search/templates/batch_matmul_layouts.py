"""The layouts of a batched matmul's tensors (``search.templates.batch_matmul``): ``BIJ`` (every tensor contiguous
in the kernel's order), ``A+W`` input layouts naming each operand's 4-D layout, and the placeholders read through
them; shared by its fp32 and bf16 kernels."""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import te

from search.errors import SearchError
from search.layouts import Layout, LayoutError, layout
from search.templates.workloads import KernelSpec

LAYOUT = "BIJ"  # every tensor contiguous in the kernel's order
SEPARATOR = "+"  # between the two operands' layouts of a strided input layout
VIEW = "NCHW"  # the kernel's own order of the 4-D view, as a layout


def operand_layouts(in_layout: str) -> tuple[str, str]:
    """The layouts of ``a`` and ``w`` that input layout ``in_layout`` names."""
    if in_layout == LAYOUT:
        return VIEW, VIEW
    parts = tuple(in_layout.split(SEPARATOR))
    if len(parts) != 2:
        raise SearchError(f"batch_matmul input layout {in_layout!r} is neither {LAYOUT} nor A{SEPARATOR}W")
    return parts  # type: ignore[return-value]


def result_layout(out_layout: str) -> str:
    """The layout of the result that output layout ``out_layout`` names."""
    return VIEW if out_layout == LAYOUT else out_layout


def input_layout(a: str, w: str) -> str:
    """The input layout naming operand layouts ``a`` and ``w`` (``BIJ`` when both are the kernel's order)."""
    return LAYOUT if (a, w) == (VIEW, VIEW) else f"{a}{SEPARATOR}{w}"


def output_layout(result: str) -> str:
    """The output layout naming result layout ``result``."""
    return LAYOUT if result == VIEW else result


def check_layouts(spec: KernelSpec) -> None:
    """``SearchError`` unless every layout ``spec`` names is an axis order of the 4-D view (no blocks) and each is
    named canonically (``BIJ`` for the kernel's own order), and its epilogue is at most an activation."""
    names = (*operand_layouts(spec.in_layout), result_layout(spec.out_layout))
    try:
        parsed = [layout(name) for name in names]
    except LayoutError as exc:
        raise SearchError(f"batch_matmul layouts {spec.in_layout}>{spec.out_layout}: {exc}") from exc
    if any(p.logical != VIEW or p.ndim != 4 for p in parsed):
        raise SearchError(f"batch_matmul layouts {spec.in_layout}>{spec.out_layout}: every layout must order the "
                          f"axes N, C, H, W of the 4-D view, unblocked")
    if (input_layout(*names[:2]), output_layout(names[2])) != (spec.in_layout, spec.out_layout):
        raise SearchError(f"batch_matmul layouts {spec.in_layout}>{spec.out_layout}: write the kernel's own order "
                          f"as {LAYOUT}")
    if spec.epilogue.bias or spec.epilogue.residual or spec.epilogue.prologue:
        raise SearchError(f"batch_matmul applies an activation after the product and nothing else; got {spec.epilogue}")


def stored_placeholder(name: str, stored: Layout, shape: tuple[int, ...], dtype: str
                 ) -> tuple[te.Tensor, Callable[..., tvm.tirx.PrimExpr]]:
    """The argument ``name`` of logical ``shape`` stored in ``stored``, and its element at logical indices."""
    tensor, at = te.placeholder(stored.physical_shape(shape), dtype, name=name), stored.stored_coordinates()
    return tensor, lambda *idx: tensor[at(*idx)]
