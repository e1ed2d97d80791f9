"""Does the module hold its speed when something else runs? Each engine quiet and beside standard background loads.

Per network, the contenders are tessera's plan as exported (its parallel loops on tessera's pool, ``search.runtime``;
with ``--spin-us``, also exported with each of those spins before a waiting thread sleeps; with
``--chunks-per-thread``, with each of those chunk counts per thread of a parallel loop; with
``--spin-on-shared-cores``, with workers that spin on shared cores too), the same plan on TVM's pool as TVM sets it
up (threads bound to cores) and unbound (``TVM_BIND_THREADS=0``), and ONNX Runtime and OpenVINO held to f32 when
installed, on the network's ONNX file. The loads are
``experiments.background_load``'s: one core spinning, one process streaming through memory, every core spinning at
nice 19; the script starts them and always stops them (Ctrl-C, SIGTERM and SIGHUP included; a ``kill -9`` of the
script takes them down too). Timing is interleaved (``experiments.interference``); the table gives each contender's
median (interquartile range) per load and its loaded/quiet ratio.

The plan and the ONNX file come from an earlier ``benchmarks/peers.py`` run in the same work folder
(``WORK/<model>/tessera/plan.json``, ``WORK/<model>/model.onnx``); the plan is exported again here, into
``WORK/<model>/interference/``.

    python benchmarks/interference.py --models yolov8n resnet50 --work /tmp/peers --rounds 5 --json out.json
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and the file solvers.py would shadow the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
from importlib.util import find_spec  # noqa: E402
from typing import Any  # noqa: E402

from experiments.background_load import LOADS  # noqa: E402
from experiments.interference import interference, interference_table, paired_table  # noqa: E402
from experiments.peers import Contender  # noqa: E402
from experiments.trials import environment_info  # noqa: E402


class Interrupted(Exception):
    """SIGTERM or SIGHUP, raised where the script is so that every ``finally`` runs."""


def _raise(signum: int, frame) -> None:
    raise Interrupted(signum)


def export_again(model_dir: Path, threads: int, name: str = "tessera", **runtime: Any) -> Path:
    """The plan of ``model_dir/tessera`` exported again with this tessera into ``interference/<name>`` (its runtime
    pool, with ``runtime``'s settings instead of the defaults), unless already done."""
    from dataclasses import replace

    from experiments.deploy import export_plan
    from search.export import save_artifact
    from search.runtime import DEFAULT_RUNTIME

    out = model_dir / "interference" / name
    if not (out / "manifest.json").is_file():
        plan = model_dir / "tessera" / "plan.json"
        if not plan.is_file():
            raise SystemExit(f"error: {plan} is missing; run benchmarks/peers.py for {model_dir.name} first")
        save_artifact(export_plan(model_dir.name, str(plan), threads=threads,
                                  runtime=replace(DEFAULT_RUNTIME, **runtime)), out)
    return out


def contenders(model_dir: Path, artifact: Path, engines: list[str], variants: dict[str, Path],
               tvm_pool: bool = True) -> list[Contender]:
    """tessera's plan, its ``variants`` (label: artifact), on TVM's pool bound and unbound (if ``tvm_pool``), and
    the ``engines`` installed."""
    found = [Contender("tessera", "tvm", artifact),
             *(Contender(label, "tvm", path) for label, path in variants.items())]
    if tvm_pool:
        found += [Contender("tessera, TVM's pool", "tvm", artifact, pool="tvm"),
                  Contender("tessera, TVM's pool unbound", "tvm", artifact, pool="tvm",
                            environment=(("TVM_BIND_THREADS", "0"),))]
    packages = {"onnxruntime": "onnxruntime", "openvino-f32": "openvino"}
    for engine in engines:
        if find_spec(packages[engine]) is None:
            print(f"{engine}: not installed, skipped", file=sys.stderr)
        else:
            found.append(Contender(engine, engine, model_dir / "model.onnx"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", required=True, help="networks with a benchmarks/peers.py result in WORK")
    parser.add_argument("--work", type=Path, required=True, help="benchmarks/peers.py's work folder")
    parser.add_argument("--loads", nargs="+", choices=LOADS, default=list(LOADS))
    parser.add_argument("--peers", nargs="*", choices=("onnxruntime", "openvino-f32"),
                        default=["onnxruntime", "openvino-f32"])
    parser.add_argument("--spin-us", type=int, nargs="*", default=[],
                        help="also the plan exported with each of these spins of tessera's pool (export --spin-us)")
    parser.add_argument("--chunks-per-thread", type=int, nargs="*", default=[],
                        help="also the plan exported with each of these chunk counts per thread of tessera's pool "
                             "(export --chunks-per-thread)")
    parser.add_argument("--spin-on-shared-cores", action="store_true",
                        help="also the plan exported with workers that spin on shared cores too "
                             "(export --spin-on-shared-cores)")
    parser.add_argument("--no-tvm-pool", dest="tvm_pool", action="store_false",
                        help="leave out the plan on TVM's pool (bound and unbound)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    loads = ["quiet", *(load for load in args.loads if load != "quiet")]
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise)
    report = {"command": " ".join(sys.argv), "date": datetime.date.today().isoformat(), "host": environment_info(),
              "loads": loads, "models": {}}
    try:
        for model in args.models:
            model_dir = args.work / model
            artifact = export_again(model_dir, args.threads)
            variants = {f"tessera, spin {spin} µs": export_again(model_dir, args.threads, f"tessera-spin{spin}",
                                                                 spin_us=spin) for spin in args.spin_us}
            variants.update({f"tessera, {chunks} chunks per thread": export_again(
                model_dir, args.threads, f"tessera-chunks{chunks}", chunks_per_thread=chunks)
                for chunks in args.chunks_per_thread})
            if args.spin_on_shared_cores:
                variants["tessera, spinning on shared cores"] = export_again(
                    model_dir, args.threads, "tessera-spin-on-shared-cores", spin_on_shared_cores=True)
            found = contenders(model_dir, artifact, args.peers, variants, args.tvm_pool)
            results = interference(found, loads, rounds=args.rounds,
                                   threads=args.threads, echo=lambda line: print(line, file=sys.stderr, flush=True))
            report["models"][model] = results
            print(f"\n{model} ({args.threads} threads, {args.rounds} rounds; ms: median (IQR))\n")
            print("\n".join(interference_table(results, loads)), flush=True)
            paired = paired_table(results, loads, "onnxruntime")
            if paired:
                print("\nPaired by round with ONNX Runtime (each round's time over ONNX Runtime's in the same load "
                      "block; median over rounds):\n")
                print("\n".join(paired), flush=True)
    except (KeyboardInterrupt, Interrupted) as stop:
        signum = stop.args[0] if isinstance(stop, Interrupted) else signal.SIGINT
        print(f"interrupted by {signal.Signals(signum).name}: the background loads were stopped", file=sys.stderr)
        return 128 + signum
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
