"""The Relax VM's cost between kernels: per call, and per run of an exported network.

1. Per call: a chain of ``--calls`` elementwise kernels on a 16-float tensor (next to nothing to compute), built with
   the VM's two execution modes, ``bytecode`` (what ``tvm.compile`` and tessera's export use) and ``compiled`` (the
   VM's instructions generated as TIR). The per-call figure is ``(time(N calls) - time(0 calls)) / N``: the VM's
   dispatch, the call through the packed-function interface, the allocation from its statically planned storage and
   the tiny kernel itself. Modes are timed in alternating rounds in this one process; medians over rounds. A third
   row, ``bytecode, parallel``, chains a kernel whose outer loop of two rows runs on the thread pool, as every
   tessera kernel's does: its excess over ``bytecode`` is the pool's hand-over (fork and join) per kernel call.
2. Per network (``--artifact DIR``, any exported artifact): ``search.profile.profile_artifact``'s VM builtins
   (allocations, reshapes, shape checks) per run, against the run's time and its listed kernel calls, and the factor
   that took the instrumented times to the uninstrumented run's.

    .venv/bin/python benchmarks/vm_overhead.py --artifact out/artifact

Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import relax, te  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.threads import use_threads  # noqa: E402

MODES = ("bytecode", "compiled", "bytecode, parallel")
SIZE = 16


def parallel_kernel() -> tvm.tirx.PrimFunc:
    """``y = x * 1.0001 + 0.5`` on (2, SIZE / 2) floats, the two rows in parallel, each vectorised."""
    x = te.placeholder((2, SIZE // 2), "float32", name="x")
    y = te.compute(x.shape, lambda i, j: x[i, j] * 1.0001 + 0.5, name="y")
    sch = tvm.s_tir.Schedule(te.create_prim_func([x, y]))
    rows, columns = sch.get_loops(sch.get_sblock("y"))
    sch.parallel(rows)
    sch.vectorize(columns)
    return sch.mod["main"].with_attr("tir.is_scheduled", True).with_attr("global_symbol", "parallel_kernel")


def chain(calls: int, parallel: bool = False) -> tvm.IRModule:
    """``main(x)``: ``calls`` kernels in a row, each its own call: alternating adds and multiplies by ``x``, or
    ``parallel_kernel``."""
    builder = relax.BlockBuilder()
    shape = (2, SIZE // 2) if parallel else (SIZE,)
    x = relax.Var("x", R.Tensor(shape, "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            kernel = builder.add_func(parallel_kernel(), "parallel_kernel") if parallel else None
            value = x
            for index in range(calls):
                if parallel:
                    value = builder.emit(relax.call_tir(kernel, (value,), R.Tensor(shape, "float32")))
                else:
                    value = builder.emit((relax.op.add if index % 2 == 0 else relax.op.multiply)(value, x))
            out = builder.emit_output(value)
        builder.emit_func_output(out)
    return builder.get()


def run_us(calls: int, mode: str, target: tvm.target.Target, number: int, repeat: int) -> float:
    """Median microseconds per run of ``chain(calls)`` built in ``mode``."""
    parallel = mode.endswith("parallel")
    with target:
        lowered = relax.get_pipeline("default")(chain(calls, parallel))
    executable = relax.build(lowered, target, relax_pipeline=None, exec_mode=mode.split(",")[0])
    vm = relax.VirtualMachine(executable, tvm.cpu())
    shape = (2, SIZE // 2) if parallel else (SIZE,)
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("float32"), tvm.cpu())
    vm["main"](x)
    results = vm.time_evaluator("main", tvm.cpu(), number=number, repeat=repeat)(x).results
    return statistics.median(results) * 1e6


def per_call(calls: int, rounds: int, threads: int) -> None:
    target = make_target(threads)
    ns: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(rounds):
        for mode in MODES:
            empty, full = run_us(0, mode, target, 2000, 9), run_us(calls, mode, target, 200, 9)
            ns[mode].append((full - empty) * 1e3 / calls)
    print(f"per call ({calls} calls of a {SIZE}-float kernel, {rounds} alternating rounds, median [min, max] ns):")
    for mode, values in ns.items():
        print(f"  {mode:18s} {statistics.median(values):7.1f}  [{min(values):.1f}, {max(values):.1f}]")


def per_network(directory: str, runs: int) -> None:
    from search.artifact import load_artifact
    from search.profile import profile_artifact

    profile = profile_artifact(load_artifact(directory), runs=runs)
    ran = sum(call.ran for call in profile.calls)
    print(f"{directory}: run {profile.run_ms:.2f} ms (uninstrumented), kernel calls {profile.calls_ms:.2f} ms "
          f"({ran} calls), VM builtins {profile.overhead_ms:.3f} ms per run ({profile.overhead_ms / profile.run_ms:.1%}"
          f", {profile.overhead_ms / max(ran, 1) * 1e3:.2f} us per kernel call); the instrumented times scaled by "
          f"x{profile.scale:.3f} to add up to the run")
    for name, ms in sorted(profile.builtins.items(), key=lambda item: -item[1]):
        print(f"  {name}: {ms:.4f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--artifact", action="append", default=[], help="an exported artifact directory (repeatable)")
    parser.add_argument("--runs", type=int, default=20, help="profiled runs per artifact")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1 or args.runs < 1 or not 1 <= args.threads <= os.cpu_count():
        parser.error("--calls, --rounds and --runs must be positive, --threads from 1 to the cores")
    use_threads(args.threads)
    print(f"host: {host().cpu}, vector unit {HOST.name}, {args.threads} threads, load {os.getloadavg()[0]:.2f}")
    per_call(args.calls, args.rounds, args.threads)
    for directory in args.artifact:
        per_network(directory, args.runs)


if __name__ == "__main__":
    main()
