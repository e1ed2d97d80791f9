"""This machine as tessera measures and compiles for it, and the one target builder.

``host()`` describes the CPU once: its model name (what records, summaries and figures name the host by; the cost
cache keys its records by it), its vector unit (``search.isa``) and the instruction-set features the kernels could
use. ``make_target(threads)`` is the TVM target every build and measurement uses: LLVM for this CPU (its own
``mcpu``, unless another is given) with ``threads`` cores. ``missing_instructions(mcpu)`` says which vector
instruction sets code compiled for another CPU may use that this one lacks (running it would end in an illegal
instruction). TVM is imported only to ask LLVM about CPUs.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING

from search.isa import HOST, VectorUnit, cpu_field, cpu_flags

if TYPE_CHECKING:
    import tvm

FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
"""The CPU flags ``Host.features`` reports when present."""

INSTRUCTION_SETS = {
    "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "avxvnni": "avx_vnni",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512cd": "avx512cd", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq", "avx512vnni": "avx512_vnni",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "amx-tile": "amx_tile", "amx-bf16": "amx_bf16", "amx-int8": "amx_int8",
}
"""LLVM's names of the x86 vector instruction sets and the CPU flags Linux reports for them."""


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


def missing_instructions(mcpu: str, flags: set[str] | None = None) -> list[str]:
    """The vector instruction sets (``INSTRUCTION_SETS``, as CPU flags) that LLVM enables for ``mcpu`` and this CPU
    lacks (by its flags, or ``flags``); empty when the flags cannot be read."""
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return []
    import tvm

    enabled = {str(name) for name in tvm.target.codegen.llvm_get_cpu_features(make_target(1, mcpu))}
    return sorted(flag for name, flag in INSTRUCTION_SETS.items() if name in enabled and flag not in flags)
