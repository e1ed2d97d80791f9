"""A run's settings: made once, threads validated and handed to TVM, the target built once for them."""

import os
from dataclasses import FrozenInstanceError

import pytest

from cost_models.cache import DEFAULT_CACHE, DEFAULT_TIMING
from experiments.settings import Settings
from search.errors import SearchError


def test_start_validates_and_sets_the_threads(monkeypatch, tmp_path):
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    settings = Settings.start(1, timing="warm", seed=3, cache=tmp_path / "c.sqlite")
    assert (settings.threads, settings.timing, settings.seed) == (1, "warm", 3)
    assert os.environ["TVM_NUM_THREADS"] == "1"
    with pytest.raises(SearchError):
        Settings.start(0)
    with pytest.raises(FrozenInstanceError):
        settings.threads = 2


def test_defaults_and_one_target_for_the_threads():
    settings = Settings(1)
    assert (settings.timing, settings.seed, settings.cache) == (DEFAULT_TIMING, 0, DEFAULT_CACHE)
    assert settings.target is settings.target and int(settings.target.attrs["num-cores"]) == 1
