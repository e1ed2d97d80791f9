"""The settings of one run: what every step of ``extract`` and ``tune`` measures, builds and times with."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from cost_models.cache import DEFAULT_CACHE, DEFAULT_TIMING
from search.threads import use_threads

if TYPE_CHECKING:
    import tvm


@dataclass(frozen=True)
class Settings:
    """Runtime ``threads`` (every kernel and module is built for and timed with them), the kernels' ``timing`` method
    (``cost_models.cache.TIMING_METHODS``), the ``seed`` of the model's random weights and inputs, and the cost
    ``cache``. Made once per run by ``Settings.start`` and passed down."""

    threads: int
    timing: str = DEFAULT_TIMING
    seed: int = 0
    cache: Path = DEFAULT_CACHE

    @classmethod
    def start(cls, threads: int | None = None, *, timing: str = DEFAULT_TIMING, seed: int = 0,
              cache: str | Path = DEFAULT_CACHE) -> Settings:
        """The settings of a run starting now: ``threads`` validated (None: every usable core) and made the TVM
        runtime's (``search.threads.use_threads``: before TVM first runs)."""
        return cls(use_threads(threads), timing, seed, Path(cache))

    @cached_property
    def target(self) -> tvm.target.Target:
        """The host CPU target with ``threads`` cores."""
        from search.host import make_target

        return make_target(self.threads)
