"""The float32 error of every registered activation's vectorised form against numpy (float64).

Each activation kind's ``tir`` form (what kernel epilogues and the standalone pass compute) is compiled as a
vectorised loop for the host and run on 200,001 evenly spaced inputs from -30 to 30 and 100,000 normal ones (sigma 3);
printed per kind: the largest error in units of max(1, |f(x)|), where it occurs, and the kind's ``tolerance`` (which
the conformance suite checks). Numerics only: the machine's load does not change the figures.

    .venv/bin/python benchmarks/activation_error.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def worst_error(kind, x: np.ndarray, target) -> tuple[float, float]:
    """(largest error, the input it occurs at) of ``kind``'s vectorised form on ``x``."""
    import tvm
    from tvm import te

    attrs = dict(kind.attributes)
    data = te.placeholder((x.size,), "float32", name="data")
    out = te.compute(data.shape, lambda i: kind.tir(data[i], attrs), name="out")
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, out]))
    (loop,) = sch.get_loops(sch.get_sblock("out"))
    sch.vectorize(sch.split(loop, [None, 16])[1])
    result = tvm.runtime.tensor(np.zeros_like(x))
    tvm.compile(sch.mod, target=target)(tvm.runtime.tensor(x), result)
    reference = kind.numpy(x.astype("float64"), attrs)
    error = np.abs(result.numpy() - reference) / np.maximum(1.0, np.abs(reference))
    return float(error.max()), float(x[error.argmax()])


def main() -> int:
    from search.followers import FOLLOWERS, ActivationKind
    from search.host import host, make_target
    from search.isa import HOST

    x = np.concatenate([np.linspace(-30, 30, 200001), np.random.default_rng(0).standard_normal(100000) * 3])
    x = x.astype("float32")
    target = make_target(1)
    print(f"host: {host().cpu}, vector unit {HOST.name}\n")
    print("| activation | largest error | at x | tolerance |")
    print("| --- | ---: | ---: | ---: |")
    for name, kind in FOLLOWERS.items():
        if isinstance(kind, ActivationKind):
            error, where = worst_error(kind, x, target)
            print(f"| {name} | {error:.2g} | {where:.4g} | {kind.tolerance:.0e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
