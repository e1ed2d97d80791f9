"""How much of an exported network's time is spent outside tessera's template kernels.

Per network (a zoo name or an ``.onnx`` file), a plan (``--plan``: a uniform baseline layout, default ``nchw16c``,
which needs no measurement, or ``tuned``: the artifact ``tessera tune`` left in ``--work/MODEL/artifact``, or
``benchmarks/peers.py`` in ``--work/MODEL/tessera`` with ``--artifact tessera``) is exported and profiled inside the
network (``search.profile.profile_artifact``: every call timed, scaled to the uninstrumented run), and its time
split into the template kernels (convolutions, linear layers and everything fused into them), layout transforms,
every other pass (elementwise followers, concats, adds and gates, fixed operators) and the Relax VM's own calls
(``search.profile.time_split``).
Printed as a markdown table with the host's CPU, vector unit and threads.

    .venv/bin/python benchmarks/outside_kernels.py --models efficientnet_b0 yolov8n --image-size yolov8n=320

Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("efficientnet_b0", "mobilenet_v3_large", "convnext_tiny", "yolov8n", "yolov8s", "resnet50", "inception_v3",
          "densenet201", "bert_base")


def profile_model(model: str, size: int | None, plan_name: str, tuned: Path, threads: int, runs: int):
    """The time split of ``model``'s plan ``plan_name`` (a baseline, exported here, or ``tuned``: the artifact in
    ``tuned``), profiled inside the network."""
    from search.artifact import load_artifact
    from search.export import export, save_artifact
    from search.graph import extract_graph
    from search.host import make_target
    from search.plan import baseline_plan
    from search.profile import profile_artifact, time_split
    from search.zoo import load_model

    if plan_name == "tuned":
        artifact = load_artifact(tuned)
        return time_split(profile_artifact(artifact, runs=runs), artifact.manifest)
    graph = extract_graph(load_model(model, image_size=size))
    compiled = export(graph, baseline_plan(graph, plan_name), target=make_target(threads), threads=threads)
    with tempfile.TemporaryDirectory() as directory:
        artifact = load_artifact(save_artifact(compiled, Path(directory)))
        return time_split(profile_artifact(artifact, runs=runs), artifact.manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--image-size", nargs="*", default=[], metavar="MODEL=SIZE",
                        help="an input size other than the model's default")
    parser.add_argument("--plan", default="nchw16c", help="a baseline layout (nchw, nhwc, nchw16c) or 'tuned'")
    parser.add_argument("--work", type=Path, default=Path("work"), help="where 'tuned' artifacts are: WORK/MODEL/...")
    parser.add_argument("--artifact", default="artifact", help="... WORK/MODEL/ARTIFACT (peers.py: tessera)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    try:
        sizes = {name: int(size) for name, size in (item.split("=") for item in args.image_size)}
    except ValueError:
        parser.error("--image-size takes MODEL=SIZE")
    if min(args.threads, args.runs) < 1:
        parser.error("--threads and --runs must be >= 1")
    from search.threads import use_threads

    use_threads(args.threads)
    from search.host import host
    from search.isa import HOST

    print(f"host: {host().cpu}, vector unit {HOST.name}, {args.threads} threads; plan {args.plan}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("\n| network | run ms | kernels ms | transforms ms | other passes ms | VM ms | outside the kernels |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model in args.models:
        label = Path(model).stem if model.endswith(".onnx") else model
        split = profile_model(model, sizes.get(model), args.plan, args.work / label / args.artifact, args.threads,
                              args.runs)
        label += f" ({sizes[model]} px)" if model in sizes else ""
        print(f"| {label} | {split.total_ms:.2f} | {split.kernels_ms:.2f} | {split.transforms_ms:.2f} | "
              f"{split.passes_ms:.2f} | {split.vm_ms:.2f} | {100 * split.outside_share:.1f}% |", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
