"""The test process starts as the command line does: TVM's thread pool may hold every usable core, so that tests can
time kernels with any thread count whichever test first runs TVM (the pool is started at once, before a command run
in-process with fewer threads would size it).

The tests run in two pytest-xdist workers (``addopts``): each file's tests on one worker, so that a module's fixtures
are built once, and the files that start Ray clusters (``RAY_FILES``) all on the same worker, one cluster at a time
(``FileScheduling``; xdist's own ``loadgroup`` marks are lost with pytest 9.2's node ids)."""

import pytest
from xdist.scheduler import LoadScopeScheduling

from search.threads import reserve_pool

RAY_FILES = {"test_cluster_measure.py", "test_ablate.py", "test_cluster.py", "test_config.py", "test_tracking.py"}


def pytest_configure(config):
    import tvm

    reserve_pool()
    tvm.runtime.num_threads()  # started now: a command a test runs in-process sets the count it would start with


class FileScheduling(LoadScopeScheduling):
    """xdist's ``loadfile`` with the ``RAY_FILES`` as one file."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return "ray" if path.rsplit("/", 1)[-1] in RAY_FILES else path


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadfile":
        return FileScheduling(config, log)


@pytest.fixture(scope="session")
def resnet18_artifact(tmp_path_factory):
    """resnet18 at 32x32 in NCHW16c, exported by ``tessera export`` (1 thread): read it, copy it before changing it."""
    from experiments.cli import main

    out = tmp_path_factory.mktemp("exported") / "resnet18"
    assert main(["export", "resnet18", "--plan", "nchw16c", "--out", str(out), "--image-size", "32"]) == 0
    return out
