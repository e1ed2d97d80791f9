"""The host's vector unit, which the templates size their vectors and register tiles for.

x86 CPUs with AVX-512 have 32 vector registers of 16 float32 lanes, AVX2 ones 16 registers of 8 lanes. tessera
compiles for the host (``search.host.make_target``), so the unit is read once, from the CPU flags the kernel reports;
without ``/proc/cpuinfo`` (not Linux) the AVX2 sizing is used, which is correct code on every x86-64 CPU with AVX2.
No TVM import: ``cost_models.features`` describes kernels with the same unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VectorUnit:
    """``lanes`` float32 lanes per vector; register tiles use at most ``accumulators`` vector registers."""

    name: str
    lanes: int
    accumulators: int


AVX512 = VectorUnit("avx512", lanes=16, accumulators=28)
AVX2 = VectorUnit("avx2", lanes=8, accumulators=14)
"""Four registers (AVX-512) or two (AVX2) stay free for the input broadcasts and the weights."""
UNITS = {unit.name: unit for unit in (AVX512, AVX2)}


def cpu_field(name: str, cpuinfo: str | Path = "/proc/cpuinfo") -> str | None:
    """The field ``name`` (``flags``, ``model name``) of the first CPU in ``cpuinfo``; None when it cannot be read."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str]:
    """The ``flags`` of the first CPU in ``cpuinfo``; empty when it cannot be read."""
    return set((cpu_field("flags", cpuinfo) or "").split())


def host_vector_unit(cpuinfo: str | Path = "/proc/cpuinfo") -> VectorUnit:
    """AVX-512 when the CPU has ``avx512f``, else AVX2."""
    return AVX512 if "avx512f" in cpu_flags(cpuinfo) else AVX2


HOST = host_vector_unit()
