"""The test process starts as the command line does: TVM's thread pool may hold every usable core, so that tests can
time kernels with any thread count whichever test first runs TVM."""

from search.threads import reserve_pool


def pytest_configure(config):
    reserve_pool()
