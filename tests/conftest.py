"""The test process starts as the command line does: TVM's thread pool may hold every usable core, so that tests can
time kernels with any thread count whichever test first runs TVM.

The tests run in two pytest-xdist workers (``addopts``): each file's tests on one worker, so that a module's fixtures
are built once, and the files that start Ray clusters (``RAY_FILES``) all on the same worker, one cluster at a time."""

import pytest

from search.threads import reserve_pool

RAY_FILES = {"test_cluster_measure.py", "test_ablate.py", "test_cluster.py", "test_config.py", "test_tracking.py"}


def pytest_configure(config):
    reserve_pool()


def pytest_collection_modifyitems(items):
    for item in items:
        group = "ray" if item.path.name in RAY_FILES else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def resnet18_artifact(tmp_path_factory):
    """resnet18 at 32x32 in NCHW16c, exported by ``tessera export`` (1 thread): read it, copy it before changing it."""
    from experiments.cli import main

    out = tmp_path_factory.mktemp("exported") / "resnet18"
    assert main(["export", "resnet18", "--plan", "nchw16c", "--out", str(out), "--image-size", "32"]) == 0
    return out
