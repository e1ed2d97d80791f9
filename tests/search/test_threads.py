"""The TVM runtime's thread count: validated, set before the pool starts, handed to child processes."""

import os

import pytest

from search.errors import SearchError
from search.threads import VARIABLE, check_threads, reserve_pool, thread_variables, usable_cores, use_threads


def test_every_usable_core_by_default_and_bad_counts_refused():
    assert check_threads(None) == usable_cores() == len(os.sched_getaffinity(0))
    for bad in (0, -1, usable_cores() + 1, 1.5, True, "2"):
        with pytest.raises(SearchError, match="usable cores"):
            check_threads(bad)


def test_use_threads_sets_the_variable_and_reserve_pool_keeps_a_set_count(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    reserve_pool()
    assert os.environ[VARIABLE] == str(usable_cores())
    assert use_threads(1) == 1 and os.environ[VARIABLE] == "1"
    reserve_pool(usable_cores())
    assert os.environ[VARIABLE] == "1"


def test_children_get_the_count_for_tvm_and_with_peers_for_the_other_pools():
    assert thread_variables(3) == {VARIABLE: "3"}
    assert set(thread_variables(2, peers=True)) == {VARIABLE, "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "OPENBLAS_NUM_THREADS"}
