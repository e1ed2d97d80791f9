"""The test process starts as the command line does: TVM's thread pool may hold every usable core, so that tests can
time kernels with any thread count whichever test first runs TVM."""

import pytest

from search.threads import reserve_pool


def pytest_configure(config):
    reserve_pool()


@pytest.fixture(scope="session")
def resnet18_artifact(tmp_path_factory):
    """resnet18 at 32x32 in NCHW16c, exported by ``tessera export`` (1 thread): read it, copy it before changing it."""
    from experiments.cli import main

    out = tmp_path_factory.mktemp("exported") / "resnet18"
    assert main(["export", "resnet18", "--plan", "nchw16c", "--out", str(out), "--image-size", "32"]) == 0
    return out
