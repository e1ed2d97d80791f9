"""The thread pool an exported library runs on: recorded in the manifest, applied by the loader and ``tessera run``,
computing what TVM's pool computes."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest
import tvm

from experiments.cli import main
from search.artifact import load_artifact
from search.errors import SearchError
from search.runtime import LAUNCH_POINTER, RuntimeSettings
from tests.cli_helpers import one_error_line


@pytest.fixture
def artifact(resnet18_artifact):
    return resnet18_artifact


def _outputs(loaded, pool: str) -> np.ndarray:
    vm = loaded.virtual_machine(2, RuntimeSettings(pool=pool))
    return vm["main"](*[tvm.runtime.tensor(a, tvm.cpu()) for a in loaded.random_inputs(0)]).numpy()


def test_the_manifest_records_tessera_s_pool_and_the_loader_points_the_library_at_it(artifact):
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["runtime"] == RuntimeSettings().to_dict() and manifest["runtime"]["pool"] == "tessera"
    loaded = load_artifact(artifact)
    library = ctypes.CDLL(str(artifact / "model.so"))
    launch = ctypes.c_void_p.in_dll(library, LAUNCH_POINTER)
    ours = ctypes.cast(library.tessera_parallel_launch, ctypes.c_void_p).value
    assert loaded.start_runtime(2) == "tessera" and launch.value == ours
    chunked = _outputs(loaded, "tessera")
    assert launch.value == ours
    stock = _outputs(loaded, "tvm")
    assert launch.value not in (None, ours)  # back on TVM's pool
    np.testing.assert_array_equal(chunked, stock)  # the same arithmetic, only shared out differently


def test_tessera_run_applies_the_artifact_s_pool_or_the_one_asked_for(artifact, capsys):
    assert main(["run", str(artifact), "--repeat", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pool"] == "tessera"
    assert main(["run", str(artifact), "--repeat", "2", "--pool", "tvm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pool"] == "tvm"
    assert main(["run", str(artifact), "--repeat", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("median ") and line.endswith("threads 1 on tessera's pool")


def test_export_records_the_spin_asked_for_and_run_changes_it_for_one_run(artifact, tmp_path, monkeypatch):
    import search.artifact

    out = tmp_path / "spin0"
    assert main(["export", "resnet18", "--plan", "nchw16c", "--image-size", "32", "--spin-us", "0", "--out",
                 str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["runtime"] == RuntimeSettings(spin_us=0).to_dict()
    measure, used = search.artifact.measure_latency, []

    def recorded(loaded, **options):
        used.append(options["runtime"])
        return measure(loaded, **options)

    monkeypatch.setattr(search.artifact, "measure_latency", recorded)
    assert main(["run", str(artifact), "--repeat", "1", "--spin-us", "0"]) == 0
    assert main(["run", str(out), "--repeat", "1", "--spin-us", "100", "--pool", "tvm"]) == 0
    assert main(["run", str(out), "--repeat", "1"]) == 0
    assert used == [RuntimeSettings(spin_us=0), RuntimeSettings(pool="tvm", spin_us=100), None]


def test_an_artifact_exported_without_runtime_settings_runs_on_tvm_s_pool():
    assert RuntimeSettings.from_dict(None) == RuntimeSettings(pool="tvm")


@pytest.mark.parametrize("runtime", [{"pool": "openmp"}, {"chunks_per_thread": 0}, {"spin_us": -1},
                                     {"spin_us": True}, {"threads": 2}, "tessera"])
def test_a_corrupt_runtime_in_the_manifest_is_one_error_line(artifact, tmp_path, capsys, runtime):
    with pytest.raises(SearchError):
        RuntimeSettings.from_dict(runtime)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("model.so", "plan.json"):
        (copy / name).symlink_to(artifact / name)
    manifest = json.loads((artifact / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "runtime": runtime}))
    assert main(["run", str(copy), "--repeat", "1"]) == 2
    assert "manifest.json is corrupt" in one_error_line(capsys)


def _copy_with_manifest(artifact, directory, **changes):
    directory.mkdir()
    for name in ("model.so", "plan.json"):
        (directory / name).symlink_to(artifact / name)
    manifest = json.loads((artifact / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps({**manifest, **changes}))
    return directory


@pytest.mark.parametrize("library", ["../model.so", "/usr/lib/x86_64-linux-gnu/libc.so.6", "..", ""])
def test_a_library_outside_the_artifact_is_refused(artifact, tmp_path, capsys, library):
    copy = _copy_with_manifest(artifact, tmp_path / "copy", library=library)
    assert main(["run", str(copy), "--repeat", "1"]) == 2
    assert "is not a file name" in one_error_line(capsys)


def test_an_artifact_for_instructions_this_cpu_lacks_is_refused_before_loading(artifact, tmp_path, capsys,
                                                                              monkeypatch):
    from search import host

    avx2 = {"avx", "avx2", "fma", "f16c"}
    assert host.missing_instructions("znver3", avx2) == []
    assert {"avx512f", "avx512_bf16", "amx_bf16"} <= set(host.missing_instructions("sapphirerapids", avx2))
    assert host.missing_instructions("sapphirerapids", set()) == []  # flags unknown: no claim
    monkeypatch.setattr(host, "cpu_flags", lambda: avx2)
    copy = _copy_with_manifest(artifact, tmp_path / "copy", target={"kind": "llvm", "mcpu": "sapphirerapids"})
    assert main(["run", str(copy), "--repeat", "1"]) == 2
    line = one_error_line(capsys)
    assert "compiled for the CPU 'sapphirerapids'" in line and "avx512f" in line and "amx_bf16" in line


def test_an_artifact_for_a_cpu_llvm_does_not_know_runs_without_a_note(artifact, tmp_path, capfd):
    copy = _copy_with_manifest(artifact, tmp_path / "copy", target={"kind": "llvm", "mcpu": "no-such-cpu"})
    assert main(["run", str(copy), "--repeat", "1"]) == 0
    assert "no-such-cpu" not in capfd.readouterr().err  # LLVM's note on the name, at the file descriptor
