"""The host's vector unit: read from the CPU flags, as LLVM sees the host, shared by templates and features."""

from __future__ import annotations

import tvm

from search.host import make_target
from search.isa import AVX2, AVX512, HOST, cpu_flags, host_vector_unit


def test_the_unit_follows_the_avx512f_flag(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu avx512f\n")
    assert cpu_flags(cpuinfo) == {"fpu", "sse2", "avx", "avx2", "fma"} and host_vector_unit(cpuinfo) is AVX2
    cpuinfo.write_text("processor\t: 0\nflags\t\t: avx2 avx512f avx512bw\n")
    assert host_vector_unit(cpuinfo) is AVX512
    assert cpu_flags(tmp_path / "missing") == set() and host_vector_unit(tmp_path / "missing") is AVX2


def test_the_host_unit_is_what_llvm_compiles_for():
    assert HOST is (AVX512 if tvm.target.codegen.target_has_features("avx512f", make_target(1)) else AVX2)


def test_templates_and_cost_model_features_use_the_host_unit_unless_sized_for_another():
    from search.kinds import features
    from search.templates.common import sized_for, unit

    assert unit() is HOST and (features.VECTOR_LANES, features.ACCUMULATORS) == (HOST.lanes, HOST.accumulators)
    other = AVX2 if HOST is AVX512 else AVX512
    with sized_for(other):
        assert unit() is other
    assert unit() is HOST
