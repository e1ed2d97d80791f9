"""How far the ways of timing one exported network are from each other.

Every artifact given is timed, in interleaved rounds (one artifact and one harness at a time, the order shifted each
round, a pause before each timing so that the previous one's idle threads stop spinning), by:

- ``tune``: the harness of ``tessera tune`` and the fidelity benchmark (``search.artifact.measure_latency``, as
  ``experiments.timing.interleaved_latency`` calls it: ``time_evaluator``'s C++ loop in this process, a VM per round);
- ``python``: a deployed Python caller, ``vm["main"](*args)`` in a Python loop in this process (one VM for all rounds);
- ``peers``: the worker process of ``benchmarks/peers.py`` (``experiments.peers.PeerWorker``: its own process, the
  network loaded once, a Python loop), one per artifact for all rounds;
- ``fresh``: a new worker process every round (as ``tessera run`` in a shell loop would see the module);
- ``profile``: ``search.profile.profile_artifact`` (5 instrumented runs each paired with an uninstrumented one): the
  instrumented calls' raw sum (``profile-sum``) and the uninstrumented runs' median (``profile-run``).

Each timing is ``number`` runs (fixed per artifact at the first round to last ~50 ms) after a warm-up run; a round's
sample is their mean. Printed per artifact: median, IQR and the ratio to ``tune``'s median, the host's CPU and vector
unit and the load average.

    .venv/bin/python benchmarks/harness.py WORK/resnet50/tessera WORK/resnet50/nchw16c --rounds 10 --threads 2

Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

HARNESSES = ("tune", "python", "peers", "fresh", "profile-sum", "profile-run")
PAUSE_SECONDS = 0.3


def _label(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def time_round(path: Path, state: dict, threads: int) -> dict[str, float]:
    """One sample of every harness for the artifact at ``path`` (``state`` keeps its VM, worker and run count)."""
    from experiments.peers import Contender, PeerWorker, time_runner
    from search.artifact import measure_latency
    from search.profile import profile_artifact

    out: dict[str, float] = {}
    time.sleep(PAUSE_SECONDS)
    latency = measure_latency(state["artifact"], repeat=1, number=state.get("number"), threads=threads)
    state["number"] = latency.number
    out["tune"] = latency.median_ms
    time.sleep(PAUSE_SECONDS)
    out["python"] = time_runner(state["run"], state["number"])[0]
    time.sleep(PAUSE_SECONDS)
    out["peers"] = state["worker"].time(state["number"])["ms"]
    fresh = PeerWorker(Contender("fresh", "tvm", path), threads)
    try:
        time.sleep(PAUSE_SECONDS)
        out["fresh"] = fresh.time(state["number"])["ms"]
    finally:
        fresh.close()
    time.sleep(PAUSE_SECONDS)
    profile = profile_artifact(state["artifact"], runs=5, warmup=1)
    out["profile-sum"] = (profile.calls_ms + profile.overhead_ms) / profile.scale
    out["profile-run"] = profile.run_ms
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", type=Path, nargs="+", help="exported artifact directories")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.artifacts if not (p / "manifest.json").is_file()]
    if missing or args.rounds < 1 or args.threads < 1:
        print(f"error: not artifact directories: {', '.join(missing)}" if missing
              else "error: --rounds and --threads must be >= 1", file=sys.stderr)
        return 2
    from search.threads import use_threads

    use_threads(args.threads)

    from experiments.peers import Contender, PeerWorker, load_runner
    from search.artifact import load_artifact
    from search.host import host
    from search.isa import HOST

    print(f"host: {host().cpu}, vector unit {HOST.name}, {args.threads} threads")
    states = {}
    for path in args.artifacts:
        run, _ = load_runner("tvm", path, args.threads)
        states[path] = {"artifact": load_artifact(path), "run": run,
                        "worker": PeerWorker(Contender(_label(path), "tvm", path), args.threads)}
    samples = {path: {h: [] for h in HARNESSES} for path in args.artifacts}
    loads = [os.getloadavg()[0]]
    try:
        for index in range(args.rounds):
            shift = index % len(args.artifacts)
            for path in args.artifacts[shift:] + args.artifacts[:shift]:
                for harness, ms in time_round(path, states[path], args.threads).items():
                    samples[path][harness].append(ms)
            print(f"round {index + 1}/{args.rounds}: " + "; ".join(
                f"{_label(p)} " + " ".join(f"{h} {samples[p][h][-1]:.2f}" for h in HARNESSES) for p in args.artifacts),
                flush=True)
    finally:
        for state in states.values():
            state["worker"].close()
    loads.append(os.getloadavg()[0])
    print(f"1-minute load average before / after: {loads[0]:.2f} / {loads[1]:.2f}")
    print("| artifact | harness | median ms (IQR) | / tune |")
    print("| --- | --- | ---: | ---: |")
    for path in args.artifacts:
        reference = float(np.median(samples[path]["tune"]))
        for harness in HARNESSES:
            p25, median, p75 = np.percentile(samples[path][harness], [25, 50, 75])
            print(f"| {_label(path)} | {harness} | {median:.2f} ({p75 - p25:.2f}) | {median / reference:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
