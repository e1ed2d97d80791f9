"""The thread pool an exported library runs on: recorded in the manifest, applied by the loader and ``tessera run``,
computing what TVM's pool computes."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm

from experiments.cli import main
from search.artifact import load_artifact
from search.errors import SearchError
from search.runtime import LAUNCH_POINTER, RuntimeSettings
from tests.cli_helpers import one_error_line

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def artifact(resnet18_artifact):
    return resnet18_artifact


def _outputs(loaded, pool: str, chunks_per_thread: int = 2) -> np.ndarray:
    vm = loaded.virtual_machine(2, RuntimeSettings(pool=pool, chunks_per_thread=chunks_per_thread))
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


OUTPUTS_WITH_CHUNKS = """
import sys
import numpy as np
from search.artifact import load_artifact
from tests.search.test_runtime import _outputs

np.save(sys.argv[2], _outputs(load_artifact(sys.argv[1]), "tessera", int(sys.argv[3])))
"""


@pytest.mark.parametrize("chunks_per_thread", [1, 7])
def test_any_chunk_count_computes_what_tvm_s_pool_computes(artifact, tmp_path, chunks_per_thread):
    out = tmp_path / "outputs.npy"
    run = subprocess.run([sys.executable, "-c", OUTPUTS_WITH_CHUNKS, str(artifact), str(out), str(chunks_per_thread)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)  # the pool is set up once a process
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(out), _outputs(load_artifact(artifact), "tvm"))


def test_tessera_run_applies_the_artifact_s_pool_or_the_one_asked_for(artifact, capsys):
    assert main(["run", str(artifact), "--repeat", "2", "--json"]) == 0
    timed = json.loads(capsys.readouterr().out)
    assert timed["pool"] == "tessera" and timed["pool_statistics"]["launches"] > 0
    assert main(["run", str(artifact), "--repeat", "2", "--pool", "tvm", "--json"]) == 0
    timed = json.loads(capsys.readouterr().out)
    assert timed["pool"] == "tvm" and timed["pool_statistics"] is None
    assert main(["run", str(artifact), "--repeat", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("median ") and line.endswith("threads 1 on tessera's pool")


def test_export_records_the_pool_settings_asked_for_and_run_changes_them_for_one_run(artifact, tmp_path,
                                                                                    monkeypatch):
    import search.artifact

    out = tmp_path / "spin0"
    assert main(["export", "resnet18", "--plan", "nchw16c", "--image-size", "32", "--spin-us", "0",
                 "--chunks-per-thread", "8", "--spin-on-shared-cores", "--out", str(out)]) == 0
    recorded_runtime = RuntimeSettings(spin_us=0, chunks_per_thread=8, spin_on_shared_cores=True)
    assert json.loads((out / "manifest.json").read_text())["runtime"] == recorded_runtime.to_dict()
    measure, used = search.artifact.measure_latency, []

    def recorded(loaded, **options):
        used.append(options["runtime"])
        return measure(loaded, **options)

    monkeypatch.setattr(search.artifact, "measure_latency", recorded)
    assert main(["run", str(artifact), "--repeat", "1", "--spin-us", "0"]) == 0
    assert main(["run", str(out), "--repeat", "1", "--spin-us", "100", "--pool", "tvm"]) == 0
    assert main(["run", str(out), "--repeat", "1", "--chunks-per-thread", "1"]) == 0
    assert main(["run", str(out), "--repeat", "1"]) == 0
    assert used == [RuntimeSettings(spin_us=0),
                    RuntimeSettings(pool="tvm", spin_us=100, chunks_per_thread=8, spin_on_shared_cores=True),
                    RuntimeSettings(spin_us=0, chunks_per_thread=1, spin_on_shared_cores=True), None]


SHARED_CORE = """
import json, os, sys, time
import tvm
from search.artifact import load_artifact
from search.runtime import RuntimeSettings, pool_statistics

artifact = load_artifact(sys.argv[1])
vm = artifact.virtual_machine(2, RuntimeSettings(spin_on_shared_cores=sys.argv[2] == "spin"))
args = [tvm.runtime.tensor(a, tvm.cpu()) for a in artifact.random_inputs(0)]
vm["main"](*args)  # starts the pool's worker
core = min(os.sched_getaffinity(0))
for thread in os.listdir("/proc/self/task"):  # every thread, the worker and the caller among them, on one core
    os.sched_setaffinity(int(thread), {core})
end = time.monotonic() + 1.5
while time.monotonic() < end:
    vm["main"](*args)
print(json.dumps(pool_statistics(artifact.directory / "model.so").to_dict()))
"""


@pytest.mark.parametrize("spin_on_shared_cores", [False, True])
def test_a_worker_whose_core_is_shared_sleeps_at_once_unless_told_to_spin(artifact, spin_on_shared_cores):
    run = subprocess.run([sys.executable, "-c", SHARED_CORE, str(artifact), "spin" if spin_on_shared_cores else "-"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    statistics = json.loads(run.stdout.splitlines()[-1])
    assert statistics["launches"] > 0
    if spin_on_shared_cores:
        assert statistics["shared_core_waits"] == 0
    else:  # the worker waits to run while the caller runs on their one core
        assert statistics["shared_core_waits"] > 0


def test_an_artifact_exported_without_runtime_settings_runs_on_tvm_s_pool():
    assert RuntimeSettings.from_dict(None) == RuntimeSettings(pool="tvm")


@pytest.mark.parametrize("runtime", [{"pool": "openmp"}, {"chunks_per_thread": 0}, {"spin_us": -1},
                                     {"spin_us": True}, {"spin_on_shared_cores": 1}, {"threads": 2}, "tessera"])
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
