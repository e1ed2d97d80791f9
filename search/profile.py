"""Where an exported network spends its time: every call of ``main`` timed inside the network.

``profile_artifact(artifact, runs)`` runs the artifact's ``main`` with ``VirtualMachine.set_instrument`` timing every
call, over ``runs`` runs after a warm-up. The artifact's manifest lists its PrimFunc calls in execution order with what
each computes (``search.emit.Origin``: a graph op, or a layout transform of a value); the timed PrimFunc calls of a run
are matched to that list in order. A listed call the VM did not run as a PrimFunc (a layout transform it turned into a
free reshape, say) took no time. Everything else the VM calls (allocation, reshapes, shape checks: its builtins) is
the run's overhead. Times are medians over the runs, in milliseconds.

The instrument costs time of its own (a Python call before and after every call, which converts the call's
arguments), so the timed calls of an instrumented run do not add up to what an uninstrumented run lasts
(docs/fidelity.md). Each run of the instrumented VM therefore follows a run of a second, uninstrumented VM, and
every time is scaled by the median uninstrumented wall time over the median sum of the timed calls: the profile adds
up to what the deployed module takes, in the same window; ``Profile.at`` takes it to a latency measured elsewhere.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from search.emit import Origin
from search.errors import SearchError

if TYPE_CHECKING:
    from search.artifact import Artifact

@dataclass(frozen=True)
class CallTime:
    """One listed call: its PrimFunc, what it computes, its median time per run (ms), and whether it ran at all."""

    symbol: str
    computes: tuple[Origin, ...]
    ms: float
    ran: bool


@dataclass(frozen=True)
class Profile:
    """The listed calls' times, the VM's own calls (``overhead_ms`` per run, by builtin in ``builtins``), the median
    wall time of an uninstrumented run (``run_ms``, which the calls and the overhead add up to) and the factor
    (``scale``) that took the instrumented times there."""

    calls: tuple[CallTime, ...]
    overhead_ms: float
    builtins: dict[str, float]
    run_ms: float
    runs: int
    scale: float = 1.0

    @property
    def calls_ms(self) -> float:
        """The listed calls' time per run."""
        return sum(call.ms for call in self.calls)

    def at(self, run_ms: float) -> Profile:
        """The same split of the time, scaled so that a run lasts ``run_ms``: the profile of a module whose latency
        was measured elsewhere (in ``tune``'s interleaved rounds, not in the profile's own window of a second)."""
        if run_ms <= 0 or self.run_ms <= 0:
            raise SearchError(f"a profile scales to a positive run time, got {run_ms} ms (profiled {self.run_ms} ms)")
        factor = run_ms / self.run_ms
        return Profile(tuple(replace(call, ms=call.ms * factor) for call in self.calls), self.overhead_ms * factor,
                       {symbol: ms * factor for symbol, ms in self.builtins.items()}, run_ms, self.runs,
                       self.scale * factor)


@dataclass(frozen=True)
class TimeSplit:
    """Where a run's time goes (ms per run): the template kernels, the layout transforms, every other pass
    (elementwise followers, concats and adds, fixed ops) and the VM's own calls."""

    kernels_ms: float
    transforms_ms: float
    passes_ms: float
    vm_ms: float

    @property
    def total_ms(self) -> float:
        return self.kernels_ms + self.transforms_ms + self.passes_ms + self.vm_ms

    @property
    def outside_share(self) -> float:
        """The share of the run spent outside the template kernels."""
        return 1.0 - self.kernels_ms / self.total_ms if self.total_ms > 0 else 0.0


def time_split(profile: Profile, manifest: dict) -> TimeSplit:
    """``profile``'s time split by what each call is: a template kernel (one of the manifest's ``kernel_symbols``),
    a layout transform (it computes transforms only), or another pass."""
    kernels = set(manifest.get("kernel_symbols", ()))
    sums = {"kernel": 0.0, "transform": 0.0, "pass": 0.0}
    for call in profile.calls:
        if call.symbol in kernels:
            sums["kernel"] += call.ms
        elif call.computes and all(origin.is_transform for origin in call.computes):
            sums["transform"] += call.ms
        else:
            sums["pass"] += call.ms
    return TimeSplit(sums["kernel"], sums["transform"], sums["pass"], profile.overhead_ms)


def listed_calls(manifest: dict) -> list[tuple[str, tuple[Origin, ...]]]:
    """An exported artifact's calls of ``main`` in order, as its manifest lists them: (PrimFunc, what it computes)."""
    if "calls" not in manifest:
        raise SearchError("the artifact lists no calls (exported by an older tessera): export it again to profile it")
    return [(call["symbol"], tuple(Origin(**{**origin, "shape": tuple(origin.get("shape", ()))})
                                   for origin in call["computes"])) for call in manifest["calls"]]


def _match(listed: list[str], trace: list[tuple[str, float]]) -> list[float | None]:
    """Seconds of each listed call from one run's PrimFunc trace (calls in order; None: it did not run)."""
    out: list[float | None] = []
    position = 0
    for symbol in listed:
        if position < len(trace) and trace[position][0] == symbol:
            out.append(trace[position][1])
            position += 1
        else:
            out.append(None)
    if position != len(trace):
        raise SearchError(f"the artifact ran {trace[position][0]} where its manifest lists no such call")
    return out


def profile_artifact(artifact: Artifact, runs: int = 20, warmup: int = 3, seed: int = 0) -> Profile:
    """Time every call of the artifact's ``main`` inside the network over ``runs`` runs (see the module docstring).

    The runtime's thread count is the artifact's where the pool has not started yet (``search.threads.reserve_pool``).
    """
    import tvm

    from search.threads import reserve_pool

    if runs < 1:
        raise SearchError(f"runs must be >= 1, got {runs}")
    listed = listed_calls(artifact.manifest)
    symbols = {symbol for symbol, _ in listed}
    reserve_pool(artifact.manifest.get("threads", 1))
    vm, plain, device = artifact.virtual_machine(), artifact.virtual_machine(), tvm.cpu()
    inputs = [tvm.runtime.tensor(array, device) for array in artifact.random_inputs(seed)]
    for _ in range(warmup):
        vm["main"](*inputs)
        plain["main"](*inputs)
    trace: list[tuple[str, float]] = []
    started: list[float] = []

    def instrument(func, symbol, before_run, ret_value, *args) -> int:
        now = time.perf_counter()
        if before_run:
            started.append(now)
        else:
            trace.append((symbol, now - started.pop()))
        return 0  # VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    per_call: list[list[float]] = [[] for _ in listed]
    ran = [False] * len(listed)
    builtins: dict[str, list[float]] = defaultdict(list)
    overheads, walls = [], []
    timer = plain.time_evaluator("main", device, number=1, repeat=1)  # timed in C++, as measure_latency times
    for _ in range(runs):
        walls.append(timer(*inputs).mean)
        trace.clear()
        vm["main"](*inputs)
        run_builtins: dict[str, float] = defaultdict(float)
        for symbol, seconds in trace:
            if symbol not in symbols:
                run_builtins[symbol] += seconds
        for index, seconds in enumerate(_match([s for s, _ in listed], [t for t in trace if t[0] in symbols])):
            per_call[index].append(0.0 if seconds is None else seconds)
            ran[index] = ran[index] or seconds is not None
        for symbol, seconds in run_builtins.items():
            builtins[symbol].append(seconds)
        overheads.append(sum(run_builtins.values()))
    medians = [statistics.median(times) if did_run else 0.0 for times, did_run in zip(per_call, ran)]
    wall = statistics.median(walls)
    scale = wall / (sum(medians) + statistics.median(overheads))
    calls = tuple(CallTime(symbol, computes, seconds * scale * 1e3, did_run)
                  for (symbol, computes), seconds, did_run in zip(listed, medians, ran))
    return Profile(calls, statistics.median(overheads) * scale * 1e3,
                   {symbol: sum(times) / runs * scale * 1e3 for symbol, times in builtins.items()},
                   wall * 1e3, runs, scale)
