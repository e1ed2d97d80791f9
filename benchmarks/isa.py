"""A network compiled for AVX2: does it run right, and what does sizing the templates for AVX2 gain there?

The templates size vectors and register tiles for the host's vector unit (``search.isa``: 16 float32 lanes and 28
accumulator registers with AVX-512, 8 and 14 with AVX2). This script compiles one zoo network's uniform NCHW16c plan
for several ``mcpu`` values with the host's sizing and, with ``--sized-for avx2`` or ``avx512``, also for ``haswell``
with that sizing (``search.templates.common.sized_for`` while the plan and the kernels are built). On an AVX-512 host
the first ``haswell`` build is what a cross-compile to AVX2 produces (and tessera before it read the host's unit); on
an AVX2 host ``--sized-for avx512`` is that old sizing.
Each build's outputs are checked against the stock TVM build; then the builds are timed in
alternating rounds (median and interquartile range of ``--repeat`` repeats, one thread unless ``--threads``).

An older ``mcpu`` runs on this host because its instructions are a subset of the host's; it shows what the code
generated for that ISA costs, not what a machine of that generation would measure.

    .venv/bin/python benchmarks/isa.py --model resnet50 --sized-for avx2 --sized-for avx512
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.artifact import Artifact, load_artifact, measure_latency  # noqa: E402
from search.export import export  # noqa: E402
from search.graph import extract_graph  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import UNITS  # noqa: E402
from search.plan import baseline_plan  # noqa: E402
from search.templates.common import sized_for  # noqa: E402
from search.zoo import load_model  # noqa: E402


def build(model: str, mcpu: str, threads: int) -> Artifact:
    """The uniform NCHW16c plan of ``model`` compiled for ``mcpu``, checked, saved and loaded back."""
    graph = extract_graph(load_model(model))
    compiled = export(graph, baseline_plan(graph, "nchw16c", model=model), target=make_target(threads, mcpu),
                      threads=threads)
    check = compiled.manifest["numerical_check"]
    print(f"  {mcpu}: relative error {check['relative_error']:.1e} (passed: {check['passed']})", flush=True)
    return load_artifact(compiled.save(tempfile.mkdtemp(prefix="tessera-isa-")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50", help="zoo network (default: resnet50)")
    parser.add_argument("--mcpu", default=f"haswell,{host().mcpu}",
                        help="comma-separated LLVM CPUs to compile for (default: haswell and the host's)")
    parser.add_argument("--sized-for", choices=sorted(UNITS), action="append", default=[],
                        help="also haswell with the templates sized for this unit (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    print(f"building {args.model} (nchw16c) for each target", flush=True)
    builds = {mcpu: build(args.model, mcpu, args.threads) for mcpu in args.mcpu.split(",")}
    for name in args.sized_for:
        with sized_for(UNITS[name]):
            builds[f"haswell, {name}-sized"] = build(args.model, "haswell", args.threads)
    for round_ in range(args.rounds):
        for label, artifact in builds.items() if round_ % 2 == 0 else reversed(builds.items()):
            lat = measure_latency(artifact, repeat=args.repeat, threads=args.threads)
            print(f"round {round_}  {label:<22} {lat.median_ms:8.2f} ms  (IQR {lat.p25_ms:.2f}..{lat.p75_ms:.2f}, "
                  f"{lat.runtime_threads} thread(s))", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
