"""How long a thread on one core takes to wake a sleeping thread on another and hear back: the machine's state for
parallel code, probed before and after each timing of the plans.

A thread pool's loop wakes its workers on the other cores and waits for them, a few hundred times per inference. On a
shared AMD EPYC ``znver2`` virtual machine (2 cores), the tuned detector's two-thread latency switched between
7.7 ms and 10.4-11.3 ms within seconds and for minutes, while one thread ran it at 14.0 ms in both states and a
loop on each core, alone or on both at once, ran at one speed throughout. What moved with it was this round trip:
a median of 27-31 us in every fast stretch, 38-46 us in every slow one (docs/fidelity.md). The load average and the
steal counter show neither. Timings of the plans taken in the two states differ by x1.2-1.6, each plan by its own
factor, so no factor read off other plans carries one to the other.

``probe_wakeup`` runs ``ROUND_TRIPS`` round trips between threads bound to the first two cores the process may run
on, each after ``IDLE_S`` of sleep (the woken core idle, as a pool's worker is between networks), and returns their
median; the caller's own binding is untouched. ``Wakeup.changed`` says whether two probes differ by more than
``TOLERANCE``.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass

ROUND_TRIPS = 40
"""Round trips per probe (about 0.1 s in all)."""

IDLE_S = 0.002
"""The sleep before each round trip, long enough for the woken thread's core to go idle."""

TOLERANCE = 0.2
"""How much two probes' medians may differ (as a ratio, less 1) before the machine counts as changed: the medians
of one state were within 15% of each other, and the two states met were x1.4 apart."""


@dataclass(frozen=True)
class Wakeup:
    """The median cross-core wake-up round trip (microseconds), between which cores, and when (seconds since the
    epoch)."""

    median_us: float
    cores: tuple[int, int]
    at: float

    def changed(self, other: Wakeup, tolerance: float = TOLERANCE) -> bool:
        """Whether this probe's median and ``other``'s differ by more than ``tolerance`` (larger over smaller, less
        1)."""
        low, high = sorted((self.median_us, other.median_us))
        return high > low * (1.0 + tolerance)

    def to_dict(self) -> dict[str, object]:
        return {"median_us": round(self.median_us, 2), "cores": list(self.cores), "at": self.at}


def probe_wakeup(round_trips: int = ROUND_TRIPS, idle_s: float = IDLE_S) -> Wakeup | None:
    """The median of ``round_trips`` wake-up round trips between the first two usable cores (see the module
    docstring); None where the process may run on one core only."""
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None
    waker, woken = usable[0], usable[1]
    go, back = threading.Event(), threading.Event()
    times: list[float] = []

    def answer() -> None:
        os.sched_setaffinity(0, {woken})  # 0: this thread only
        for _ in range(round_trips):
            go.wait()
            go.clear()
            back.set()

    def wake() -> None:
        os.sched_setaffinity(0, {waker})
        for _ in range(round_trips):
            time.sleep(idle_s)
            start = time.perf_counter()
            go.set()
            back.wait()
            times.append((time.perf_counter() - start) * 1e6)
            back.clear()

    at = time.time()
    threads = [threading.Thread(target=answer, name="tessera-wakeup-answer"),
               threading.Thread(target=wake, name="tessera-wakeup-wake")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Wakeup(statistics.median(times), (waker, woken), at)
