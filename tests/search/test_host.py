"""The host description and the one target builder."""

from __future__ import annotations

import tvm

from search.host import FEATURES, host, make_target
from search.isa import HOST, cpu_field, cpu_flags


def test_cpu_fields_are_read_from_the_first_cpu(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: avx2\n\nmodel name\t: Other\n")
    assert cpu_field("model name", cpuinfo) == "Some CPU 9000" and cpu_field("bogomips", cpuinfo) is None
    assert cpu_field("flags", tmp_path / "missing") is None


def test_the_host_names_its_cpu_unit_and_features():
    described = host()
    assert described is host() and described.cpu and described.unit is HOST
    assert described.features == cpu_flags() & set(FEATURES)
    assert described.mcpu == tvm.target.codegen.llvm_get_system_cpu()


def test_the_target_is_this_cpu_with_the_threads_asked_unless_another_cpu_is_named():
    target = make_target(3)
    assert (target.kind.name, str(target.mcpu), int(target.attrs["num-cores"])) == ("llvm", host().mcpu, 3)
    assert str(make_target(1, "haswell").mcpu) == "haswell"
