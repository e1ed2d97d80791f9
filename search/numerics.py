"""How far computed outputs are from reference ones: the one relative-error measure of tessera.

``relative_error`` is ``max|out - ref| / max|ref|`` per output (in float64), the largest over the outputs. A plan's
export check, the peers' agreement and the imported networks' checks use it as is; the kernel checks compare float32
kernels against float64 references with ``floor=1``, so that a reference near zero is measured absolutely.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def relative_error(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray], *, floor: float = 1e-12) -> float:
    """Largest ``max|out - ref| / max(floor, max|ref|)`` over paired outputs; inf if their number or shapes differ,
    0 for no outputs."""
    if len(outputs) != len(reference) or any(out.shape != ref.shape for out, ref in zip(outputs, reference)):
        return float("inf")
    return max((float(np.max(np.abs(np.asarray(out, np.float64) - ref), initial=0.0))
                / max(floor, float(np.max(np.abs(ref), initial=0.0))) for out, ref in zip(outputs, reference)),
               default=0.0)
