"""Where a long run's wall time goes: ``PhaseClock`` charges each second to the phase running then.

Phases nest: the time of an inner phase is charged to it alone, not to the phase around it, so the phases' seconds
add up to the time spent inside any of them.

Examples
--------
>>> clock = PhaseClock()
>>> with clock.phase("measure"):
...     with clock.phase("solve"):
...         pass
>>> sorted(clock.seconds)
['measure', 'solve']
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class PhaseClock:
    """Wall seconds by phase name, in the order the phases were first entered."""

    seconds: dict[str, float] = field(default_factory=dict)
    _running: list[str] = field(default_factory=list, repr=False)
    _mark: float = field(default=0.0, repr=False)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the ``with`` block to ``name`` (less the phases entered within it)."""
        self._switch()
        self.seconds.setdefault(name, 0.0)
        self._running.append(name)
        try:
            yield
        finally:
            self._switch()
            self._running.pop()

    def _switch(self) -> None:
        """Charge the time since the last switch to the phase running, and start counting anew."""
        now = time.perf_counter()
        if self._running:
            self.seconds[self._running[-1]] += now - self._mark
        self._mark = now
