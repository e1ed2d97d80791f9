"""Where ONNX Runtime gains on a network: its per-node profile beside tessera's measured costs of the same plan.

Reads what ``benchmarks/peers.py`` left in ``--work`` for the network (``model.onnx`` and the plan in
``tessera/plan.json``), runs ONNX Runtime with its profiler (same settings as the peers benchmark: every graph
optimisation, ``--threads`` intra-op threads, the seed-0 inputs), and sums its node times per run by kind: the
convolutions by kernel shape (read from the weight input), the matrix products as ``dense`` (by a weight) or
``batch_matmul`` (of two activations), the rest by operator. Tessera's side is the plan's cost
from the cost cache (``extract`` measures nothing when the cache is warm): each convolution's kernel cost grouped the
same way, and the layout transforms; beside it, the exported plan (``tessera/``) profiled inside the network: every
call of ``main`` timed with ``VirtualMachine.set_instrument`` over ``--runs`` runs and summed the same way (the other
operators by function name). Then tessera's convolutions that lose the most time against ONNX Runtime's mean rate
over all its convolutions. GFLOP/s counts 2 x multiply-adds of the convolutions and matrix products (ONNX Runtime's
from its nodes' shapes, tessera's from its nodes' workloads).

    python benchmarks/ort_breakdown.py --model inception_v3 --work peers-work/inception_v3 [--threads 2] [--runs 20]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

from search.artifact import Latency  # noqa: E402

MATMULS = ("MatMul", "FusedMatMul", "Gemm")


def ort_kind(op: str, shapes: list[list[int]], out: list[int] | None) -> tuple[str, float]:
    """An ONNX Runtime node's kind and GFLOP: ``conv KHxKW``, ``batch_matmul`` (a product of two activations of 3 or
    more dimensions), ``dense`` (any other matrix product: by a weight, which ONNX Runtime lists as 2-D or, once it
    has packed it, without a shape), else its operator (no GFLOP)."""
    if "Conv" in op and len(shapes) > 1 and len(shapes[1]) == 4:
        return f"conv {shapes[1][2]}x{shapes[1][3]}", 0.0
    if op in MATMULS and shapes and out:
        gflop = 2 * math.prod(out) * shapes[0][-1] / 1e9
        return ("batch_matmul" if len(shapes) > 1 and len(shapes[1]) > 2 else "dense"), gflop
    return op, 0.0


def ort_profile(onnx_path: Path, threads: int, runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """ONNX Runtime's node time per run (ms) and GFLOP per run, summed by kind (``ort_kind``)."""
    from experiments.peers import onnxruntime_session

    with tempfile.TemporaryDirectory(prefix="tessera-ort-") as scratch:
        session, feed = onnxruntime_session(onnx_path, threads, str(Path(scratch) / "profile"))
        for _ in range(5):  # warm-up, left out below by counting only the last ``runs`` model runs
            session.run(None, feed)
        for _ in range(runs):
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    starts = sorted(e["ts"] for e in events if e.get("cat") == "Session" and e["name"] == "model_run")
    first = starts[-runs]
    totals: dict[str, float] = defaultdict(float)
    flops: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time") or event["ts"] < first:
            continue
        shapes = [next(iter(s.values())) for s in event["args"].get("input_type_shape", [])]
        outs = [next(iter(s.values())) for s in event["args"].get("output_type_shape", [])]
        kind, gflop = ort_kind(event["args"]["op_name"], shapes, outs[0] if outs else None)
        totals[kind] += event["dur"] / 1e3 / runs
        flops[kind] += gflop / runs
    return dict(totals), dict(flops)


KERNEL_SYMBOL = re.compile(r"([a-z][a-z0-9_]*?_\d+)_[A-Z].*")  # search.emit's kernel names: node, then its layouts
TRANSFORMS = "layout transforms (edges)"


def tessera_profile(
    artifact_dir: Path, threads: int, runs: int, kinds: dict[str, str]
) -> tuple[dict[str, float], Latency]:
    """The exported plan's calls timed inside the network (ms per run), summed by kind: kernels by their node's kind
    in ``kinds``, layout transforms together, the other functions by name (trailing digits dropped); and the median
    of ``runs`` repeats without the instrument (``search.artifact.measure_latency``), to show what timing every call
    adds."""
    import tvm

    from search.artifact import load_artifact, measure_latency

    artifact = load_artifact(artifact_dir)
    plain = measure_latency(artifact, repeat=runs, threads=threads)  # also fixes the runtime's thread count
    vm, device = artifact.virtual_machine(), tvm.cpu()
    inputs = [tvm.runtime.tensor(array, device) for array in artifact.random_inputs(0)]
    for _ in range(5):  # warm-up
        vm["main"](*inputs)
    seconds: dict[str, float] = defaultdict(float)
    started: dict[str, float] = {}

    def instrument(func, symbol, before_run, ret_value, *args) -> int:
        now = time.perf_counter()
        if before_run:
            started[symbol] = now
        else:
            seconds[symbol] += now - started.pop(symbol)
        return 0  # VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    for _ in range(runs):
        vm["main"](*inputs)
    totals: dict[str, float] = defaultdict(float)
    for symbol, total in seconds.items():
        kernel = KERNEL_SYMBOL.fullmatch(symbol)
        if kernel and kernel.group(1) in kinds:
            kind = kinds[kernel.group(1)]
        else:
            kind = TRANSFORMS if "layout_transform" in symbol else symbol.rstrip("0123456789")
        totals[kind] += total * 1e3 / runs
    return dict(totals), plain


def tessera_costs(
    model: str, plan_path: Path, threads: int
) -> tuple[dict[str, float], dict[str, float], list[tuple[float, float, str]], dict[str, str]]:
    """The plan's measured cost (ms) and the convolutions' and matrix products' GFLOP by kind, from the cost cache,
    per convolution (ms, GFLOP, description), and each node's kind."""
    from cost_models.pricing import plan_assignment
    from experiments.extraction import extract
    from search.kinds import kernel_kind

    plan = json.loads(plan_path.read_text())
    extracted = extract(model, threads=threads, **{"costs": "measured", **plan["args"]})
    problem, choices = extracted.problem, plan["choices"]
    x = problem.to_indices(plan_assignment(problem, choices))  # with the shared transforms' auxiliary nodes
    auxiliary = set(problem.meta.get("auxiliary", ()))
    costs: dict[str, float] = defaultdict(float)
    flops: dict[str, float] = defaultdict(float)
    convs, kinds = [], {}
    for node, i in zip(problem.nodes, x):
        if node.name in auxiliary:  # a value converted once for its readers: a transform
            costs[TRANSFORMS] += float(node.costs[i])
            continue
        op = extracted.graph.op(node.name)
        if op.kind in ("dense", "batch_matmul"):
            flops[op.kind] += kernel_kind(op.kind).workload(op).flops / 1e9
        if op.kind == "conv2d":
            kh, kw = op.attrs["kernel"]
            kind = f"conv {kh}x{kw}"
            n, k, h, w = op.shape
            c = op.input_shapes[0][1]
            gflop = 2 * n * k * h * w * c // op.attrs["groups"] * kh * kw / 1e9
            flops[kind] += gflop
            _, _, in_h, in_w = op.input_shapes[0]
            convs.append((float(node.costs[i]), gflop, f"{node.name} {c}x{in_h}x{in_w} -> {k}x{h}x{w}, {kh}x{kw} "
                          f"stride {op.attrs['strides'][0]}, as {node.candidates[i]}"))
        else:
            kind = op.kind
        kinds[node.name] = kind
        costs[kind] += float(node.costs[i])
    costs[TRANSFORMS] += sum(float(m[x[u], x[v]]) for (u, v), m in problem.pairs.items())
    return dict(costs), dict(flops), convs, kinds


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _rate(gflop: float | None, ms: float | None) -> str:
    return "-" if not gflop or not ms else f"{gflop / ms * 1e3:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", type=Path, required=True, help="the network's folder in peers.py's --work")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=10, help="convolutions to list (default: 10)")
    args = parser.parse_args(argv)
    for needed in (args.work / "model.onnx", args.work / "tessera" / "plan.json"):
        if not needed.is_file():
            parser.error(f"{needed} is missing: run benchmarks/peers.py --models {args.model} --work ... first")
    ort_ms, ort_flops = ort_profile(args.work / "model.onnx", args.threads, args.runs)
    ours, flops, convs, node_kinds = tessera_costs(args.model, args.work / "tessera" / "plan.json", args.threads)
    inside, plain = tessera_profile(args.work / "tessera", args.threads, args.runs, node_kinds)
    kinds = sorted(set(ort_ms) | set(ours) | set(inside),
                   key=lambda k: -max(ort_ms.get(k, 0.0), ours.get(k, 0.0), inside.get(k, 0.0)))
    print(f"{args.model}: ONNX Runtime node times (profiler, mean of {args.runs} runs), tessera's plan costs "
          f"(cost cache) and its calls timed in the network (mean of {args.runs} runs), ms per inference, "
          f"{args.threads} threads\n")
    print("| kind | GFLOP | onnxruntime ms | GFLOP/s | tessera ms | GFLOP/s | tessera / onnxruntime "
          "| tessera in network ms | GFLOP/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind in kinds:
        a, b, c, g = ort_ms.get(kind), ours.get(kind), inside.get(kind), flops.get(kind)
        ratio = f"{b / a:.2f}" if a and b else "-"
        print(f"| {kind} | {_cell(g)} | {_cell(a)} | {_rate(ort_flops.get(kind) or g, a)} | {_cell(b)} "
              f"| {_rate(g, b)} | {ratio} "
              f"| {_cell(c)} | {_rate(g, c)} |")
    total_a, total_b, total_c = sum(ort_ms.values()), sum(ours.values()), sum(inside.values())
    print(f"| total | {sum(flops.values()):.2f} | {total_a:.2f} | | {total_b:.2f} | | "
          f"{total_b / total_a if total_a else math.nan:.2f} | {total_c:.2f} | |")
    print(f"\ntessera's plan end to end without the instrument: {plain.median_ms:.2f} ms (median of {plain.repeat} "
          f"repeats of {plain.number} runs, IQR {plain.spread_ms:.2f} ms, {plain.runtime_threads} runtime threads); "
          f"the instrumented calls sum to {total_c:.2f} ms.")
    if not convs:
        return 0
    rate = sum(flops.values()) / total_a * 1e3 if total_a else math.nan
    lost = sorted(((ms - g / rate * 1e3, ms, g, what) for ms, g, what in convs), reverse=True)[: args.top]
    print(f"\nTessera's convolutions losing the most time against ONNX Runtime's mean rate ({rate:.0f} GFLOP/s):\n")
    print("| convolution (input -> output, kernel, chosen candidate) | tessera ms | GFLOP/s | ms over that rate |")
    print("| --- | ---: | ---: | ---: |")
    for extra, ms, g, what in lost:
        print(f"| {what} | {ms:.2f} | {g / ms * 1e3:.0f} | {extra:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
