"""A network compiled for AVX2: does it run right, and what does sizing the templates for AVX2 gain there?

The templates size vectors and register tiles for the host's vector unit (``search.isa``: 16 float32 lanes and 28
accumulator registers with AVX-512, 8 and 14 with AVX2). This script compiles one zoo network's uniform NCHW16c plan
for several ``mcpu`` values with the host's sizing and, with ``--avx2-sized``, also for ``haswell`` with the AVX2 sizing
(the constants replaced while the plan and the kernels are built). On an AVX-512 host, the first ``haswell`` build is
what a cross-compile to AVX2 (or tessera before it read the host's unit) produces.
Each build's outputs are checked against the stock TVM build; then the builds are timed in
alternating rounds (median and interquartile range of ``--repeat`` repeats, one thread unless ``--threads``).

An older ``mcpu`` runs on this host because its instructions are a subset of the host's; it shows what the code
generated for that ISA costs, not what a machine of that generation would measure.

    .venv/bin/python benchmarks/isa.py --model resnet50 --avx2-sized
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tvm  # noqa: E402

import search.lower  # noqa: E402
from search.artifact import Artifact, load_artifact, measure_latency  # noqa: E402
from search.export import export  # noqa: E402
from search.graph import extract_graph  # noqa: E402
from search.isa import AVX2  # noqa: E402
from search.plan import baseline_plan  # noqa: E402
from search.templates import common, conv2d, depthwise  # noqa: E402
from search.zoo import load_model  # noqa: E402

AVX2_SIZED = {"VECTOR_LANES": AVX2.lanes, "MAX_ACCUMULATORS": AVX2.accumulators}


@contextmanager
def constants(values: dict[str, int]) -> Iterator[None]:
    """The templates' vector constants set to ``values`` (every module holding a copy) for the duration."""
    modules = (common, conv2d, depthwise)
    saved = [(m, name, getattr(m, name)) for m in modules for name in values if hasattr(m, name)]
    lanes = search.lower.LANES
    try:
        for module, name, _ in saved:
            setattr(module, name, values[name])
        search.lower.LANES = values.get("VECTOR_LANES", lanes)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        search.lower.LANES = lanes


def build(model: str, mcpu: str, threads: int) -> Artifact:
    """The uniform NCHW16c plan of ``model`` compiled for ``mcpu``, checked, saved and loaded back."""
    graph = extract_graph(load_model(model))
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": threads})
    compiled = export(graph, baseline_plan(graph, "nchw16c", model=model), target=target, threads=threads)
    check = compiled.manifest["numerical_check"]
    print(f"  {mcpu}: relative error {check['relative_error']:.1e} (passed: {check['passed']})", flush=True)
    return load_artifact(compiled.save(tempfile.mkdtemp(prefix="tessera-isa-")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50", help="zoo network (default: resnet50)")
    parser.add_argument("--mcpu", default=f"haswell,{tvm.target.codegen.llvm_get_system_cpu()}",
                        help="comma-separated LLVM CPUs to compile for (default: haswell and the host's)")
    parser.add_argument("--avx2-sized", action="store_true", help="also haswell with the constants sized for AVX2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    print(f"building {args.model} (nchw16c) for each target", flush=True)
    builds = {mcpu: build(args.model, mcpu, args.threads) for mcpu in args.mcpu.split(",")}
    if args.avx2_sized:
        with constants(AVX2_SIZED):
            builds["haswell, AVX2-sized"] = build(args.model, "haswell", args.threads)
    for round_ in range(args.rounds):
        for label, artifact in builds.items() if round_ % 2 == 0 else reversed(builds.items()):
            lat = measure_latency(artifact, repeat=args.repeat, threads=args.threads)
            print(f"round {round_}  {label:<20} {lat.median_ms:8.2f} ms  (IQR {lat.p25_ms:.2f}..{lat.p75_ms:.2f}, "
                  f"{lat.runtime_threads} thread(s))", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
