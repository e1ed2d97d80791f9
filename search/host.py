"""This machine as tessera measures and compiles for it, and the one target builder.

``host()`` describes the CPU once: its model name (what records, summaries and figures name the host by; the cost
cache keys its records by it), its vector unit (``search.isa``) and the instruction-set features the kernels could
use. ``make_target(threads)`` is the TVM target every build and measurement uses: LLVM for this CPU (its own
``mcpu``, unless another is given) with ``threads`` cores. TVM is imported only to name the CPU for LLVM.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING

from search.isa import HOST, VectorUnit, cpu_field, cpu_flags

if TYPE_CHECKING:
    import tvm

FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
"""The CPU flags ``Host.features`` reports when present."""


@dataclass(frozen=True)
class Host:
    """``cpu``: the model name (the platform's processor string without ``/proc/cpuinfo``, else "unknown");
    ``unit``: the vector unit the templates size for; ``features``: the flags of ``FEATURES`` this CPU has."""

    cpu: str
    unit: VectorUnit
    features: frozenset[str]

    @property
    def mcpu(self) -> str:
        """LLVM's name of this CPU (``tvm.target.codegen.llvm_get_system_cpu``)."""
        import tvm

        return tvm.target.codegen.llvm_get_system_cpu()


@functools.cache
def host() -> Host:
    """The description of this machine, read once."""
    cpu = cpu_field("model name") or platform.processor() or "unknown"
    return Host(cpu, HOST, frozenset(cpu_flags()) & frozenset(FEATURES))


def make_target(threads: int, mcpu: str | None = None) -> tvm.target.Target:
    """The LLVM target for ``mcpu`` (default: this CPU) with ``threads`` cores."""
    import tvm

    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu or host().mcpu, "num-cores": int(threads)})
