"""Real ONNX models no one on the project wrote, end to end: import, tune, export, check against TVM's own build.

By default the models are PP-OCR's three networks as the RapidOCR wheel on PyPI ships them
(``rapidocr_onnxruntime==1.4.4``): the text-direction classifier ``ch_ppocr_mobile_v2.0_cls_infer.onnx`` (a
MobileNetV3-style network), the DBNet detector ``ch_PP-OCRv4_det_infer.onnx`` and the SVTR recogniser
``ch_PP-OCRv4_rec_infer.onnx``. The wheel is fetched with ``pip download --no-deps`` into the work directory and
unpacked there (never into the repository); ``--model FILE=SHAPE`` takes other files instead.

For each model: the ONNX operators (those the zoo's vocabulary has no form for run as fixed ops), the import with
``--input-shape`` bound dynamic dimensions, ``experiments.tune.tune`` with a tiny candidate space and the work
directory's own cost cache (measure, solve, export with tessera's numerical check, time against the uniform
baselines), then the exported artifact against TVM's own build of the same file (``from_onnx`` of the file with its
inputs bound and its shape arithmetic folded, which TVM's frontend needs for PP-OCR's Reshape targets) on the same
random input, and against ONNX Runtime on the original file if it is installed. Prints a table.

    .venv/bin/python benchmarks/real_onnx.py --work /tmp/onnx-work
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tvm  # noqa: E402

from experiments.tune import tune  # noqa: E402
from search.artifact import load_artifact, random_arrays  # noqa: E402
from search.export import run_vm  # noqa: E402
from search.graph import extract_graph  # noqa: E402
from search.host import make_target  # noqa: E402
from search.numerics import relative_error  # noqa: E402
from search.zoo import load_model  # noqa: E402
from search.zoo.onnx import bound_model, read_onnx  # noqa: E402

WHEEL = "rapidocr_onnxruntime==1.4.4"
MODELS = {  # file in the wheel's models/ -> a small input shape it accepts (DBNet: sides divisible by 32)
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": "1,3,48,192",
    "ch_PP-OCRv4_det_infer.onnx": "1,3,96,96",
    "ch_PP-OCRv4_rec_infer.onnx": "1,3,48,160",
}


def fetch(work: Path) -> dict[Path, str]:
    """The wheel's models unpacked under ``work/models`` (downloaded once), with their default input shapes."""
    models = work / "models"
    if not all((models / name).is_file() for name in MODELS):
        subprocess.run([sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "-d", str(work / "pkg")],
                       check=True)
        wheel = next((work / "pkg").glob("rapidocr_onnxruntime-*.whl"))
        models.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            for name in MODELS:
                (models / name).write_bytes(archive.read(f"rapidocr_onnxruntime/models/{name}"))
    return {models / name: shape for name, shape in MODELS.items()}


def operators(path: Path) -> tuple[collections.Counter, list[str]]:
    """ONNX operator counts of ``path`` (Constant left out) and its dynamic inputs as ``name: dims``."""
    graph = read_onnx(path).graph
    initializers = {t.name for t in graph.initializer}
    dynamic = []
    for info in graph.input:
        dims = info.type.tensor_type.shape.dim
        if info.name not in initializers and any(d.dim_value <= 0 for d in dims):
            dynamic.append(f"{info.name}: " + ",".join(str(d.dim_value) if d.dim_value > 0 else d.dim_param or "?"
                                                       for d in dims))
    return collections.Counter(n.op_type for n in graph.node if n.op_type != "Constant"), dynamic


def tvm_reference(path: Path, shape: str, inputs, target) -> list:
    """TVM's own build of the file (inputs bound, shape arithmetic folded; no tessera rewriting) run on ``inputs``."""
    from tvm.relax.frontend.onnx import from_onnx

    bound, _ = bound_model(read_onnx(path), input_shape=shape, source=str(path))
    return run_vm(tvm.compile(from_onnx(bound, keep_params_in_input=False), target=target), inputs)


def onnxruntime_error(path: Path, inputs, outputs) -> float | None:
    """Relative error of ``outputs`` against ONNX Runtime on the original file; None without onnxruntime."""
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: array for i, array in zip(session.get_inputs(), inputs)}
    return relative_error(outputs, session.run(None, feeds))


def run(path: Path, shape: str, args: argparse.Namespace) -> dict:
    counts, dynamic = operators(path)
    print(f"{path.name}: {sum(counts.values())} nodes, dynamic inputs {'; '.join(dynamic) or 'none'}", flush=True)
    print("  operators: " + ", ".join(f"{op} {n}" for op, n in sorted(counts.items())), flush=True)
    start = time.perf_counter()
    graph = extract_graph(load_model(str(path), input_shape=shape))
    roles = collections.Counter(op.role for op in graph.ops)
    fixed = collections.Counter(op.kind for op in graph.ops if op.role == "fixed")
    row = {"model": path.name, "shape": shape, "import_s": time.perf_counter() - start, **roles}
    print(f"  imported at {shape} in {row['import_s']:.1f} s: {roles['tunable']} tunable ops, {roles['follower']} "
          "followers, fixed ops " + ", ".join(f"{kind} {n}" for kind, n in fixed.most_common()), flush=True)
    out = args.work / "tune" / path.stem
    summary = tune(str(path), out, input_shape=shape, space_size=args.space_size, layouts=args.layouts,
                   threads=args.threads, cache=args.work / "costs.sqlite", repeat=args.repeat,
                   echo=lambda line: print(f"  {line}", flush=True))
    artifact = load_artifact(out / "artifact")
    inputs = random_arrays(artifact.manifest["input_shapes"].values(), args.seed)
    outputs = run_vm(artifact.library, inputs)
    row["vs_tvm"] = relative_error(outputs, tvm_reference(path, shape, inputs, make_target(args.threads)))
    row["vs_ort"] = onnxruntime_error(path, inputs, outputs)
    row["plan_ms"] = summary["plan"]["latency"]["median_ms"]
    row["best_baseline"] = min((result["latency"]["median_ms"], name) for name, result in summary["baselines"].items())
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="work directory: the downloaded wheel, models, cost cache and tune outputs")
    parser.add_argument("--model", action="append", default=[], metavar="FILE=SHAPE",
                        help="an ONNX file and its --input-shape (repeatable; default: the RapidOCR models)")
    parser.add_argument("--space-size", type=int, default=2)
    parser.add_argument("--layouts", default="NCHW,NCHW8c")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the compared random input")
    args = parser.parse_args(argv)

    args.work.mkdir(parents=True, exist_ok=True)
    models = {Path(f): s for f, _, s in (m.partition("=") for m in args.model)} if args.model else fetch(args.work)
    rows = [run(path, shape, args) for path, shape in models.items()]
    print("\n| model | input | tunable | followers | fixed | plan ms | best baseline ms | vs TVM's build | "
          "vs ONNX Runtime |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ort = "-" if r["vs_ort"] is None else f"{r['vs_ort']:.1e}"
        baseline_ms, baseline = r["best_baseline"]
        print(f"| {r['model']} | {r['shape']} | {r['tunable']} | {r['follower']} | {r['fixed']} | {r['plan_ms']:.3g} | "
              f"{baseline_ms:.3g} ({baseline}) | {r['vs_tvm']:.1e} | {ort} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
