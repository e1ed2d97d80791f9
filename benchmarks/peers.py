"""End-to-end latency of tessera's plan next to its peers, on the same network and weights, timed side by side.

Per network (batch 1, ``--threads`` for everyone):

1. tessera: ``experiments.extraction.extract`` (measures what the cost cache lacks, timed by ``--timing``, over
   ``--layouts`` and ``--space-size`` if given), the best of
   pbqp and ilp (60 s), the plan exported and checked; its seconds are recorded;
   with ``--precision auto`` (or bf16), also ``tessera-auto``: the same space with bf16 candidates, solved within
   the error budget ``--max-error`` (``experiments.budget``; default ``search.precision.DEFAULT_MAX_ERROR``); with
   ``--fp32-values`` as well, ``tessera-auto-fp32-values``: tessera-auto's plan with the values it keeps in bf16
   between operators kept in fp32 (the same kernels; ``search.layouts``), what keeping them in bf16 brings; with
   ``--calibration-samples N`` as well, ``tessera-int8``: the same search given N calibration inputs, so int8
   candidates too (``search.activation_ranges``), its budget checked on them (without calibration inputs, the budget
   is checked on the timed input: ``--inputs``' first sample, or the random one). The calibration inputs are N draws
   of the distribution the timed input comes from (standard normal; seeds 1 to N, the timed input is seed 0), or
   the user's (``--calibration-data FILE.npz``, the format of ``tessera tune --calibration-data``), kept in
   ``WORK/<model>/calibration.npz``;
2. tessera's uniform baselines (all NCHW, all NHWC, all NCHW16c), exported and checked;
3. TVM MetaSchedule tuning the stock NCHW module for the same wall-clock budget (``--budget``, default: what tessera
   spent, see ``metaschedule_budget``), compiled and checked (``--no-metaschedule`` skips; ``--reuse-metaschedule``
   times the artifact an earlier run left in the work folder instead of tuning again);
4. PyTorch eager (NCHW and channels-last; transformers as Hugging Face and timm run them, with
   ``F.scaled_dot_product_attention``), ONNX Runtime and OpenVINO's CPU plugin (``openvino`` in the precision it
   picks for the CPU, bf16 where the CPU computes it; ``openvino-f32`` held to f32) on the zoo network re-emitted
   with the same weights (``search.zoo.torch_net``, ``torch_transformer``, ``search.zoo.onnx.save``,
   ``save_transformer``; needs ``pip install -e ".[peers]"``); with calibration inputs, ``onnxruntime-int8``: that
   ONNX file quantised as ONNX Runtime's users quantise it (``onnxruntime.quantization.quantize_static``: QDQ
   format, per-channel weights, its default types and min-max calibration on the same calibration inputs, after its
   pre-processing); a peer
   that is not installed, channels-last on a transformer, or PyTorch on a network with operators ``torch_net`` does
   not write, is skipped and named in the table.

A model is a zoo name or an ``.onnx`` file (its dynamic dimensions bound by ``--input-shape``; its results kept under
the file's stem): the ONNX peers then run that file with its inputs' shapes fixed to the timed ones (PyTorch runs only
the zoo's networks). Every contender runs one input: random (seed 0), or ``--inputs FILE.npz`` (the calibration
format; its first sample), on which the output errors are taken.

Then all contenders are timed in interleaved rounds, each in its own worker process (``experiments.peers``). The
table gives each contender's median and interquartile range over the rounds, and peer / tessera (> 1: tessera is
faster). Each network's result is kept in ``WORK/<model>/result.json`` with the command that ran it (a rerun skips
finished networks, so networks can be run one invocation at a time); ``--results`` gets the markdown of every network
finished in ``WORK`` (the section between ``<!-- end-to-end -->`` markers is replaced), and each network run now is an
MLflow run in the experiment ``peers`` (``--tracking-uri``, default ``sqlite:///mlflow.db`` here).

    python benchmarks/peers.py --models resnet50 --work /tmp/peers --results benchmarks/RESULTS.md
    python benchmarks/peers.py --models resnet18 --image-size 64 --budget 60 --rounds 3   # a quick check
    python benchmarks/peers.py --models det.onnx --input-shape 1,3,320,320 --inputs timed.npz \
        --calibration-data calibration.npz --precision auto --no-metaschedule   # a file and its data
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and the file solvers.py would shadow the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from importlib.metadata import PackageNotFoundError, version  # noqa: E402

from cost_models.cache import DEFAULT_TIMING, TIMING_METHODS  # noqa: E402
from experiments.peers import Contender, interleaved_peers, save_onnx, save_pytorch  # noqa: E402
from experiments.trials import environment_info  # noqa: E402
from search.export import TOLERANCE  # noqa: E402

COLD_MEASURING_SECONDS = {"resnet50": 812.0, "ssd_resnet50_512": 1602.0, "inception_v3": 1331.0, "densenet201": 3702.0}
"""Seconds tessera spent measuring each network's space from an empty cost cache on this machine (2 threads):
resnet50 13m32s, ssd_resnet50_512 26m42s; inception_v3 and densenet201 scaled to every task from runs that found a
few cached (1920 of 2629 tasks in 972 s, 7220 of 7451 in 3587 s, on 2026-11-23; docs/end_to_end.md)."""
BASELINES = ("nchw", "nhwc", "nchw16c")
PEERS = ("metaschedule", "pytorch", "pytorch-cl", "onnxruntime", "openvino", "openvino-f32")
ONNX_PEERS = ("onnxruntime", "openvino", "openvino-f32")
"""The peers that run the network's ONNX file; each is its engine."""
MARK = "<!-- end-to-end: written by benchmarks/peers.py -->"
MODELS = ("resnet50", "densenet201", "inception_v3", "ssd_resnet50_512")


def prepare_tessera(model: str, work: Path, args, calibration: Path | None) -> tuple[dict[str, Path], dict]:
    """Extract (measuring what the cache lacks), solve with pbqp and ilp, export the best plan and the baselines;
    the reduced-precision plans (``--precision``), with int8 candidates given ``calibration`` inputs."""
    from cost_models.sources import MeasuredSource
    from experiments.extraction import extract
    from search.export import export, reference_outputs
    from search.host import make_target
    from search.plan import Plan, baseline_plan, plan_from_assignment
    from solvers import solve

    start = time.monotonic()
    extracted = extract(model, image_size=args.image_size, input_shape=args.input_shape, threads=args.threads,
                        costs=MeasuredSource(args.timing), layouts=args.layouts, space_size=args.space_size,
                        **({"cache": args.cache} if args.cache else {}))
    solutions = {"pbqp": solve(extracted.problem, "pbqp"), "ilp": solve(extracted.problem, "ilp", time_limit=60.0)}
    solver = min(solutions, key=lambda name: solutions[name].cost)
    plans = {"tessera": plan_from_assignment(solutions[solver].assignment, extracted.model, extracted.args,
                                             auxiliary=extracted.problem.meta.get("auxiliary", ()))}
    for name in BASELINES:  # a baseline identical to an earlier one (a BERT has no layout to choose) runs once
        choices = baseline_plan(extracted.graph, name).choices
        if all(plan.choices != choices for label, plan in plans.items() if label != "tessera"):
            plans[name] = Plan(choices, extracted.model, extracted.args)
    target = make_target(args.threads)
    reference = reference_outputs(extracted.graph, target, extracted.args["seed"])
    paths = {}
    for label, plan in plans.items():
        compiled = export(extracted.graph, plan, target=target, threads=args.threads, seed=extracted.args["seed"],
                          reference=reference)
        paths[label] = compiled.save(work / label)
        if label == "tessera":
            facts = {"tasks": extracted.tasks, "measured": extracted.new, "extract_seconds": extracted.seconds,
                     "tessera_seconds": time.monotonic() - start, "predicted_ms": solutions[solver].cost,
                     "solver": solver, "status": solutions[solver].status}
    if args.precision != "fp32":
        paths["tessera-auto"], facts["reduced"] = prepare_reduced(model, work, args, extracted.graph, reference)
    if args.precision != "fp32" and args.fp32_values:
        plan = Plan.load(paths["tessera-auto"] / "plan.json")
        fp32_values = Plan({node: _fp32_values(extracted.graph.op(node), choice)
                            for node, choice in plan.choices.items()}, plan.model, plan.args)
        compiled = export(extracted.graph, fp32_values, target=target, threads=args.threads,
                          seed=extracted.args["seed"], reference=reference, max_error=facts["reduced"]["budget"]
                          ["max_error"])
        paths["tessera-auto-fp32-values"] = compiled.save(work / "tessera-auto-fp32-values")
    if calibration is not None:
        paths["tessera-int8"], facts["int8"] = prepare_reduced(model, work, args, extracted.graph, reference,
                                                               calibration, "tessera-int8")
    return paths, facts


def calibration_inputs(graph, path: Path, samples: int, given: Path | None = None) -> Path:
    """A calibration file (``search.activation_ranges``) at ``path``: ``given``'s samples, or ``samples`` draws of
    the random timed input's distribution (``search.artifact.random_arrays``, seeds 1 to ``samples``; the timed
    input is seed 0)."""
    from search.activation_ranges import load_calibration
    from search.artifact import random_arrays

    shapes = [shape for _, shape in graph.inputs]
    draws = (load_calibration(given, graph) if given else
             [random_arrays(shapes, seed, graph.input_dtypes) for seed in range(1, samples + 1)])
    return _save_inputs(graph, path, draws)


def timed_input(graph, path: Path, given: Path) -> Path:
    """``given``'s first sample (the calibration format) as the one input every contender runs (one array per input
    name, ``experiments.peers.feed``), at ``path``."""
    from search.activation_ranges import load_calibration

    return _save_inputs(graph, path, load_calibration(given, graph)[0], stacked=False)


def _save_inputs(graph, path: Path, samples, stacked: bool = True) -> Path:
    import numpy as np

    names = [name for name, _ in graph.inputs]
    arrays = ({name: np.stack([sample[i] for sample in samples]) for i, name in enumerate(names)} if stacked else
              dict(zip(names, samples, strict=True)))
    np.savez(path, **arrays)
    return path


def static_onnx(source: Path, graph, path: Path) -> Path:
    """The ONNX file ``source`` with its inputs' dimensions fixed to ``graph``'s (the shapes tessera compiled and
    every contender runs), its shapes inferred again, at ``path``: what ONNX Runtime's quantisation (which reads
    static shapes) and the ONNX peers run."""
    import onnx

    model, shapes = onnx.load(str(source)), dict(graph.inputs)
    for info in model.graph.input:
        for dim, size in zip(info.type.tensor_type.shape.dim, shapes.get(info.name, ()), strict=False):
            dim.Clear()
            dim.dim_value = int(size)
    del model.graph.value_info[:]
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))
    return path


def quantised_onnx(onnx_file: Path, calibration: Path) -> Path:
    """``onnx_file`` quantised by ONNX Runtime's static quantisation as its documentation has users do it: a file
    of an opset below 13 converted to 13 (``onnx.version_converter``: per-channel QDQ needs ``DequantizeLinear``'s
    axis), the model pre-processed (``quant_pre_process``; its symbolic shape inference, which needs sympy, skipped:
    the shapes are static), then ``quantize_static`` (QDQ, per-channel, its defaults otherwise) with
    ``calibration``'s inputs; beside it."""
    import numpy as np
    import onnx
    from onnx.version_converter import convert_version
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with np.load(calibration) as data:
        arrays = {name: data[name] for name in data.files}

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            count = len(next(iter(arrays.values())))
            self.feeds = iter([{name: array[i] for name, array in arrays.items()} for i in range(count)])

        def get_next(self):
            return next(self.feeds, None)

    source, prepared, out = (onnx_file.with_name(onnx_file.stem + suffix)
                             for suffix in (".opset13.onnx", ".prepared.onnx", ".int8.onnx"))
    model = onnx.load(str(onnx_file))
    if next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) < 13:
        onnx.save(convert_version(model, 13), str(source))
    else:
        source = onnx_file
    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)  # static shapes: sympy not needed
    quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return out


def _fp32_values(op, choice: str) -> str:
    """A plan's choice for ``op`` with its layouts of bf16 values (``NCHW32c.bf16``) replaced by their fp32 twins: the
    same kernel on fp32 values (a concat: the same op), or the kind's fp32 default where it computes in bf16 on bf16
    values alone (a depthwise convolution)."""
    from search.candidates import Candidate
    from search.kinds import KernelKind, get_kind
    from search.layouts import stored_as

    candidate = Candidate.parse(choice)
    twin = Candidate(stored_as(candidate.in_layout, "fp32"), stored_as(candidate.out_layout, "fp32"), candidate.knobs)
    if twin == candidate or op.role != "tunable":
        return choice
    kind = get_kind(op.kind)
    if not isinstance(kind, KernelKind):
        return twin.name
    space = kind.knob_space(kind.spec(op, twin.in_layout, twin.out_layout))
    return (twin if twin.knobs in space else Candidate(twin.in_layout, twin.out_layout, ())).name


def prepare_reduced(model: str, work: Path, args, graph, reference, calibration: Path | None = None,
                    label: str = "tessera-auto") -> tuple[Path, dict]:
    """``tessera-auto``: the space with bf16 candidates (``--precision``), solved with pbqp and ilp within the error
    budget, exported and checked against it; with ``calibration`` inputs, int8 candidates too (``label``
    ``tessera-int8``), the budget checked on those inputs."""
    from cost_models.sources import MeasuredSource
    from experiments.budget import budget_for, solve_within
    from experiments.extraction import extract
    from experiments.solving import make_solvers, solve_all
    from search.activation_ranges import load_calibration
    from search.export import check_inputs, export

    start = time.monotonic()
    extracted = extract(model, image_size=args.image_size, input_shape=args.input_shape, threads=args.threads,
                        costs=MeasuredSource(args.timing), layouts=args.layouts, space_size=args.space_size,
                        precision=args.precision,
                        max_error=args.max_error, calibration_data=calibration,
                        **({"cache": args.cache} if args.cache else {}))
    if extracted.calibration is None and args.inputs:  # the budget held on the input every contender runs
        extracted = dataclasses.replace(extracted, calibration=check_inputs(
            extracted.graph, extracted.settings.target, load_calibration(args.inputs, extracted.graph)[:1]))
    budget, chosen = budget_for(extracted), make_solvers("pbqp,ilp", 60.0)
    solved = solve_within(extracted, lambda problem: solve_all(problem, chosen), budget,
                          lambda line: print(f"{model}: {line}", file=sys.stderr))
    plan = extracted.plan(solved.solutions[solved.best])
    compiled = export(graph, plan, target=extracted.settings.target, threads=args.threads,
                      seed=extracted.args["seed"], reference=reference, max_error=budget.max_error,
                      checked_on=extracted.calibration)
    check = compiled.manifest["numerical_check"]
    facts = {"label": label, "precision": args.precision, "tasks": extracted.tasks, "measured": extracted.new,
             "seconds": time.monotonic() - start, "predicted_ms": solved.solutions[solved.best].cost,
             "solver": solved.best, "bf16_nodes": len(plan.bf16_nodes), "int8_nodes": len(plan.int8_nodes),
             "bf16_values": len(plan.bf16_values),
             "operators": len(plan.choices), "relative_error": check["relative_error"], "budget": budget.to_dict(),
             **({"calibration_samples": check["samples"], "top1_changed": check["top1_changed"]}
                if calibration else {"checked_on": "the timed input (--inputs)"} if args.inputs else {})}
    return compiled.save(work / label), facts


def missing_peers(model: str, mod) -> dict[str, str]:
    """The peer engines that cannot run ``model`` (built as ``mod``) here, with the reason (not installed; channels-last
    PyTorch on a transformer; a network with operators ``search.zoo.torch_net`` does not write)."""
    from importlib.util import find_spec

    from search.zoo import is_transformer
    from search.zoo.torch_net import unsupported_ops

    packages = {"pytorch": "torch", "onnxruntime": "onnxruntime", "openvino": "openvino", "openvino-f32": "openvino"}
    missing = {name: f"{package} is not installed (pip install -e \".[peers]\")"
               for name, package in packages.items() if find_spec(package) is None}
    if "pytorch" not in missing and is_transformer(model):
        missing["pytorch-cl"] = "channels-last memory is for convolutions; a transformer runs as its library runs it"
    elif "pytorch" not in missing and (ops := unsupported_ops(mod)):
        reason = f"search.zoo.torch_net has no PyTorch equivalent for {', '.join(ops)}"
        missing.update({"pytorch": reason, "pytorch-cl": reason})
    return missing


def metaschedule_budget(model: str, facts: dict, budget: float | None) -> float:
    """``budget`` if given; else what tessera spent from an empty cache plus this run's solving and exporting. The
    measuring time is this run's if it measured at least 95% of the tasks (scaled up to all of them; the rest were
    cached by another network), otherwise ``COLD_MEASURING_SECONDS``."""
    if budget:
        return budget
    solve_export = facts["tessera_seconds"] - facts["extract_seconds"]
    if facts["measured"] >= 0.95 * facts["tasks"]:
        return facts["extract_seconds"] * facts["tasks"] / facts["measured"] + solve_export
    if model in COLD_MEASURING_SECONDS:
        return COLD_MEASURING_SECONDS[model] + solve_export
    raise SystemExit(f"error: {model}: the cost cache was warm and no cold-cache time is known; pass --budget SECONDS")


def run_model(model: str, work: Path, args, command: str) -> dict | None:
    """Time ``model``'s contenders (a zoo name or an ``.onnx`` file) and keep the result in ``work``; None if an
    earlier run already did."""
    from search.graph import extract_graph
    from search.zoo import load_model

    done = work / "result.json"
    if done.is_file():
        print(f"{model}: already done ({done})", file=sys.stderr)
        return None
    work.mkdir(parents=True, exist_ok=True)
    print(f"{model}: tessera (measure, solve, export) and the baselines", file=sys.stderr)
    mod = load_model(model, image_size=args.image_size, input_shape=args.input_shape)
    graph, onnx_source = extract_graph(mod), Path(model) if model.endswith(".onnx") else None
    inputs = timed_input(graph, work / "input.npz", args.inputs) if args.inputs else None
    calibration = (calibration_inputs(graph, work / "calibration.npz", args.calibration_samples, args.calibration_data)
                   if args.precision != "fp32" and (args.calibration_samples or args.calibration_data) else None)
    paths, facts = prepare_tessera(model, work, args, calibration)
    contenders = [Contender(label, "tvm", path, inputs=inputs) for label, path in paths.items()]
    earlier = work / "metaschedule" / "manifest.json"
    if args.reuse_metaschedule and earlier.is_file():
        facts["metaschedule"] = {**json.loads(earlier.read_text())["metaschedule"], "reused": True}
        print(f"{model}: MetaSchedule reused from {earlier.parent}", file=sys.stderr)
        contenders.append(Contender("metaschedule", "tvm", work / "metaschedule", inputs=inputs))
    elif not args.no_metaschedule:
        from experiments.metaschedule import tune_metaschedule

        budget = metaschedule_budget(model, facts, args.budget)
        print(f"{model}: MetaSchedule for {budget:.0f} s", file=sys.stderr)
        try:
            manifest = tune_metaschedule(mod if onnx_source else model, work / "metaschedule", budget_seconds=budget,
                                         threads=args.threads, image_size=args.image_size)
        except Exception as exc:  # reported in the results; the other contenders still run
            facts["metaschedule_error"] = f"{type(exc).__name__}: {exc}"
            print(f"{model}: MetaSchedule failed: {facts['metaschedule_error']}", file=sys.stderr)
        else:
            facts["metaschedule"] = manifest["metaschedule"]
            contenders.append(Contender("metaschedule", "tvm", work / "metaschedule", inputs=inputs))
    missing = missing_peers(model, mod)
    if onnx_source:
        missing.update({peer: "PyTorch runs the zoo's networks (search.zoo.torch_net), not ONNX files"
                        for peer in ("pytorch", "pytorch-cl")})
    if "pytorch" not in missing:
        contenders.append(Contender("pytorch", "pytorch", save_pytorch(mod, work / "model.pt", model), inputs=inputs))
    if "pytorch" not in missing and "pytorch-cl" not in missing:
        contenders.append(Contender("pytorch-cl", "pytorch-cl", work / "model.pt", inputs=inputs))
    onnx_peers = [peer for peer in ONNX_PEERS if peer not in missing]
    if onnx_peers:
        onnx_file = (static_onnx(onnx_source, graph, work / "model.onnx") if onnx_source else
                     save_onnx(mod, work / "model.onnx", model))
        contenders += [Contender(peer, peer, onnx_file, inputs=inputs) for peer in onnx_peers]
        if "onnxruntime" in onnx_peers and "int8" in facts:
            contenders.append(Contender("onnxruntime-int8", "onnxruntime",
                                        quantised_onnx(onnx_file, calibration), inputs=inputs))
    for peer, reason in missing.items():
        facts.setdefault("skipped", {})[peer] = reason
        print(f"{model}: {peer} skipped: {reason}", file=sys.stderr)
    latency = interleaved_peers(contenders, rounds=args.rounds, threads=args.threads,
                                echo=lambda line: print(f"{model}: {line}", file=sys.stderr))
    for reduced in (facts[key] for key in ("reduced", "int8") if key in facts):  # errors held to the budget
        latency[reduced["label"]]["precision"] = (
            f"bf16 on {reduced['bf16_nodes']}" + (f", int8 on {reduced['int8_nodes']}" if reduced["int8_nodes"] else "")
            + f" of {reduced['operators']} nodes")
    if "tessera-auto-fp32-values" in latency:
        latency["tessera-auto-fp32-values"]["precision"] = latency["tessera-auto"]["precision"] + ", fp32 between them"
    if "onnxruntime-int8" in latency:
        latency["onnxruntime-int8"]["precision"] = "int8: static QDQ, per-channel"
    result = {"model": work.name, **({"source": model, "input_shape": args.input_shape} if onnx_source else {}),
              **({"inputs": str(args.inputs)} if args.inputs else {}),
              "image_size": args.image_size, "threads": args.threads, "rounds": args.rounds,
              "date": datetime.datetime.now().isoformat(timespec="seconds"), "command": command, **facts,
              "latency": latency}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def table(result: dict) -> list[str]:
    """Markdown rows: contender, engine, median and IQR (ms), peer / tessera."""
    own = result["latency"]["tessera"]["median_ms"]
    lines = [f"### {result['model']}" + (f" at {result['image_size']}px" if result["image_size"] else "")
             + (f" ({result['source']} at {result['input_shape']})" if "source" in result else ""), "",
             f"tessera: {result['tasks']} tasks ({result['measured']} measured in this run), plan predicted "
             f"{result['predicted_ms']:.2f} ms ({result['solver']}, {result['status']}), "
             f"{result['tessera_seconds']:.0f} s in this run. " + (
                 "MetaSchedule: {trials} trials over {tasks} tasks in {tuning_seconds:.0f} s (budget "
                 "{budget_seconds:.0f} s{earlier}). ".format(
                     **result["metaschedule"],
                     earlier=", tuned by an earlier run" if result["metaschedule"].get("reused") else "")
                 if "metaschedule" in result else
                 f"MetaSchedule failed: {result['metaschedule_error']}. " if "metaschedule_error" in result else "")
             + _reduced_line(result.get("reduced")) + _reduced_line(result.get("int8"))
             + f"{result['rounds']} interleaved rounds, {result['threads']} threads; {result['date']}; "
             f"`{result['command']}`.", "",
             "| contender | engine | median ms | IQR ms | min..max ms | contender / tessera | output error |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, r in result["latency"].items():
        error = f"{r['max_error']:.1e}" if "max_error" in r else "-"
        engine = f"{r['engine']} {r['engine_version']}" + (f" ({r['precision']})" if "precision" in r else "")
        lines.append(f"| {label} | {engine} | {r['median_ms']:.2f} | {r['spread_ms']:.2f} | "
                     f"{r['min_ms']:.2f}..{r['max_ms']:.2f} | {r['median_ms'] / own:.2f} | {error} |")
    reduced = {label: r["precision"] for label, r in result["latency"].items() if r.get("precision", "f32") != "f32"}
    wrong = [label for label, r in result["latency"].items()
             if r.get("max_error", 0.0) > TOLERANCE and label not in reduced]
    if reduced:
        lines += ["", "Reduced precision: " + ", ".join(f"{label} computes in {p}" for label, p in reduced.items())
                  + f"; its output error is that precision's, not held to {TOLERANCE:g}."]
    if wrong:
        lines += ["", f"**Outputs differ** from tessera's beyond {TOLERANCE:g}: {', '.join(wrong)}; their times are "
                  "not comparable."]
    elif any("max_error" in r for r in result["latency"].values()):
        lines += ["", f"Output error: max |output - tessera's| / max |tessera's| on the timed input (at most "
                  f"{TOLERANCE:g} for float32 reordering)."]
    else:
        lines += ["", "Output error: not checked in this run (before the check existed)."]
    for peer, reason in result.get("skipped", {}).items():
        lines.append(f"Not timed: {peer} ({reason}).")
    return lines


def _reduced_line(reduced: dict | None) -> str:
    """What the table says of ``tessera-auto``; empty without it."""
    if reduced is None:
        return ""
    budget, label = reduced["budget"], reduced.get("label", "tessera-auto")
    int8 = f", int8 on {reduced['int8_nodes']}" if reduced.get("int8_nodes") else ""
    values = f" ({reduced['bf16_values']} writing bf16 values)" if reduced.get("bf16_values") else ""
    checked = (f" on {reduced['calibration_samples']} calibration inputs (top-1 changed on "
               f"{reduced['top1_changed']:.0%})" if "calibration_samples" in reduced and
               reduced["top1_changed"] is not None else
               f" on {reduced['calibration_samples']} calibration inputs" if "calibration_samples" in reduced else
               f" on {reduced['checked_on']}" if "checked_on" in reduced else "")
    return (f"{label} (precision {reduced['precision']}): bf16 on {reduced['bf16_nodes']}{values}{int8} of "
            f"{reduced['operators']} nodes, relative error {reduced['relative_error']:.1e}{checked} within the "
            f"budget {budget['max_error']:g} ({len(budget['checks'])} plans checked, {len(budget['forbidden'])} nodes "
            f"limited in precision), {reduced['tasks']} tasks ({reduced['measured']} measured in this run), plan "
            f"predicted {reduced['predicted_ms']:.2f} ms ({reduced['solver']}), {reduced['seconds']:.0f} s. ")


def summary(results: list[dict]) -> list[str]:
    """One markdown row per network: each contender's median over tessera's ("-" where it did not run)."""
    labels = ["tessera-auto", "tessera-int8", *BASELINES, *PEERS, "onnxruntime-int8"]
    lines = ["| network | tessera (ms) | " + " | ".join(labels) + " |", "| --- | ---: |" + " ---: |" * len(labels)]
    for result in results:
        latency = result["latency"]
        own = latency["tessera"]["median_ms"]
        cells = [f"{latency[label]['median_ms'] / own:.2f}" if label in latency else "-" for label in labels]
        lines.append(f"| {result['model']} | {own:.2f} | " + " | ".join(cells) + " |")
    return lines


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "missing"


def finished(work: Path) -> list[dict]:
    """Every network's result in ``work``, in the default order of ``--models`` and then by name."""
    results = [json.loads(path.read_text()) for path in sorted(work.glob("*/result.json"))]
    order = {model: i for i, model in enumerate(MODELS)}
    return sorted(results, key=lambda r: (order.get(r["model"], len(order)), r["model"]))


def openvino_capabilities(results: list[dict]) -> str:
    """``" (OpenVINO's CPU capabilities: ...)"`` as an OpenVINO worker reported them in ``results``; empty if none
    ran."""
    reported = [r["cpu_capabilities"] for result in results for r in result["latency"].values()
                if "cpu_capabilities" in r]
    return f" (OpenVINO's CPU capabilities: {', '.join(reported[0])})" if reported else ""


def write_results(path: Path, results: list[dict]) -> None:
    from experiments.report import replace_section

    env = environment_info()
    versions = ", ".join(f"{p} {_version(p)}" for p in ("apache-tvm", "tessera"))
    lines = ["## End-to-end latency against PyTorch, ONNX Runtime, OpenVINO and MetaSchedule", "",
             f"{env['cpu']} (LLVM `{env['mcpu']}`, {env['vector_unit']}), {env['cores']} usable cores"
             f"{openvino_capabilities(results)}; {versions}; each network's "
             "table names the engine versions it was timed with.", "",
             "Contender / tessera, medians over the interleaved rounds (> 1: tessera is faster):", "",
             *summary(results), ""]
    for result in results:
        lines += [*table(result), ""]
    replace_section(path, MARK, lines, "Benchmarks against peers")


def log_mlflow(results: list[dict], tracking_uri: str | None) -> None:
    from experiments.tracking import log_benchmark_run

    for result in results:
        own = result["latency"]["tessera"]["median_ms"]
        metrics = {"tessera_seconds": result["tessera_seconds"], "predicted_ms": result["predicted_ms"]}
        for label, r in result["latency"].items():
            metrics.update({f"{label}_median_ms": r["median_ms"], f"{label}_iqr_ms": r["spread_ms"],
                            f"ratio_{label}": r["median_ms"] / own})
        params = {key: result[key] for key in ("model", "image_size", "threads", "rounds", "date")}
        log_benchmark_run("peers", f"end-to-end {result['model']}", params, metrics, result, tracking_uri)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--image-size", type=int, default=None, help="default: each model's own")
    parser.add_argument("--input-shape", default=None,
                        help="an ONNX file's input shape(s), as tessera tune takes them (binds dynamic dimensions)")
    parser.add_argument("--inputs", type=Path, default=None,
                        help="the input every contender runs and errors are taken on: a .npz in the calibration "
                        "format, its first sample (default: random, seed 0)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=None, help="MetaSchedule seconds (default: what tessera spent)")
    parser.add_argument("--no-metaschedule", action="store_true")
    parser.add_argument("--reuse-metaschedule", action="store_true",
                        help="time the MetaSchedule artifact an earlier run left in WORK/<model>/metaschedule "
                        "(tune as usual where there is none, unless --no-metaschedule)")
    parser.add_argument("--work", type=Path, default=Path("peers-work"))
    parser.add_argument("--cache", type=Path, default=None, help="cost cache (default: tessera's)")
    parser.add_argument("--timing", choices=TIMING_METHODS, default=DEFAULT_TIMING,
                        help="how the kernels the plan is solved on are timed (default: %(default)s)")
    parser.add_argument("--layouts", nargs="+", default=None,
                        help="the layouts tessera searches (default: tune's; the baselines' are added)")
    parser.add_argument("--space-size", type=int, default=None, help="candidates per node (default: tune's)")
    parser.add_argument("--precision", choices=("fp32", "bf16", "auto"), default="fp32",
                        help="also time tessera-auto, a plan searched with bf16 candidates (default: fp32 only)")
    parser.add_argument("--max-error", type=float, default=None,
                        help="tessera-auto's error budget (default: search.precision.DEFAULT_MAX_ERROR)")
    parser.add_argument("--fp32-values", action="store_true",
                        help="with --precision auto: also tessera-auto-fp32-values, tessera-auto's plan with every "
                        "value it keeps in bf16 between operators kept in fp32 instead (the same kernels)")
    parser.add_argument("--calibration-samples", type=int, default=0,
                        help="with --precision auto: also tessera-int8 and onnxruntime-int8, calibrated on this many "
                        "draws of the timed input's distribution (default: 0, none)")
    parser.add_argument("--calibration-data", type=Path, default=None,
                        help="with --precision auto: calibrate tessera-int8 and onnxruntime-int8 on this .npz "
                        "(tessera tune's --calibration-data format) instead of random draws")
    parser.add_argument("--results", type=Path, default=None, help="markdown file to write the tables into")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    command = " ".join(["python benchmarks/peers.py", *(sys.argv[1:] if argv is None else argv)])
    fresh, failed = [], []
    for model in filter(None, args.models.split(",")):
        try:
            result = run_model(model, args.work / (Path(model).stem if model.endswith(".onnx") else model), args,
                               command)
        except (ValueError, RuntimeError) as exc:  # bad input or a failed check: one line; the others still run
            print(f"error: {model}: {exc}", file=sys.stderr)
            failed.append(model)
            continue
        if result is not None:
            fresh.append(result)
    for result in fresh:
        print("\n".join(table(result)) + "\n")
    if args.results:
        write_results(args.results, finished(args.work))
    log_mlflow(fresh, args.tracking_uri)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
