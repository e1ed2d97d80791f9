"""End-to-end latency of one network in several engines, timed side by side, each in its own process.

An engine runs one saved network on the CPU:

- ``tvm``: a tessera artifact directory (a plan, a uniform baseline or a MetaSchedule build), run by the Relax VM;
- ``pytorch`` and ``pytorch-cl``: a module saved with ``torch.save`` (``search.zoo.torch_net``; transformers
  ``search.zoo.torch_transformer``), run eagerly under ``torch.inference_mode``, in NCHW or channels-last memory
  format;
- ``onnxruntime``: an ``.onnx`` file (``search.zoo.onnx.save``, ``save_transformer`` for transformers), run by ONNX
  Runtime's CPU provider with every graph optimisation on;
- ``openvino`` and ``openvino-f32``: the same ``.onnx`` file compiled by OpenVINO for its CPU plugin with a latency
  performance hint, in the precision OpenVINO picks for the CPU (bf16 where the CPU computes it, else f32) or held to
  f32; the worker reports the precision it ran in and the CPU's optimisation capabilities.

``interleaved_peers`` starts one worker process per contender (``python -m experiments.peers serve ENGINE PATH``: the
engine's own thread pool, its threads fixed by ``--threads``, the model loaded once) and asks them for one timing each,
in turn, round after round, in the order of ``search.interleave`` (one contender later each round, every other round
reversed), so that drift of a shared machine hits all alike; between its requests a worker is stopped, so that threads
its engine leaves busy do not load another's timing. Every timing runs the same input (the contender's ``inputs`` file,
or else ``search.artifact.random_arrays``, seed 0): a warm-up run, then ``number`` runs (fixed at the first round to
last at least ``MIN_SECONDS``) whose mean is that round's sample. The result per contender is the median of the rounds
with quartiles and extremes, and ``max_error``: before the rounds every worker saves its outputs for that input, and
each is compared with the first contender's (largest absolute difference over the largest absolute reference value, per
output; inf if the outputs' shapes differ), so a peer that computes another network is caught. torch, onnxruntime and
openvino are optional (``pip install -e ".[peers]"``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from experiments.background_load import die_with_parent
from search.interleave import interleave, latency_summary
from search.numerics import relative_error
from search.runtime import POOLS
from search.threads import thread_variables

ENGINES = ("tvm", "pytorch", "pytorch-cl", "onnxruntime", "openvino", "openvino-f32")
ONNX_DTYPES = {"tensor(float)": "float32", "tensor(int64)": "int64", "tensor(int32)": "int32"}
MIN_SECONDS = 0.2
"""Each timing lasts at least this long (``number`` runs of the network)."""
SETTLE_SECONDS = 0.3
"""Pause before each timing, so that the previous contender's idle threads stop spinning."""


@dataclass(frozen=True)
class Contender:
    """A label, the engine that runs it and the saved network it runs; for a tessera artifact, the thread pool that
    runs its parallel loops (``search.runtime``; None: the manifest's); variables added to the worker's
    environment; the input it runs (``inputs``: a ``.npz`` of one array per input name, of the input's shape; None:
    random, see ``feed``)."""

    label: str
    engine: str
    path: Path
    pool: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    inputs: Path | None = None


def load_runner(engine: str, path: Path, threads: int, pool: str | None = None, inputs: Path | None = None
                ) -> tuple[Callable[[], Any], dict[str, Any]]:
    """A zero-argument callable running the network once on its fixed input, and facts about the engine (``pool``
    and ``inputs``: see ``Contender``)."""
    if engine == "tvm":
        import tvm
        from tvm import relax

        from search.artifact import load_artifact

        artifact = load_artifact(path)
        runtime = replace(artifact.runtime, pool=pool) if pool else artifact.runtime
        pool_used = artifact.start_runtime(threads, runtime)
        vm = relax.VirtualMachine(artifact.library, tvm.cpu())
        shapes, dtypes = artifact.manifest["input_shapes"], artifact.manifest.get("input_dtypes", {})
        specs = [(name, shape, dtypes.get(name, "float32")) for name, shape in shapes.items()]
        args = [tvm.runtime.tensor(a, tvm.cpu()) for a in feed(specs, inputs).values()]
        vm["main"](*args)
        threads_used = int(tvm.get_global_func("runtime.NumThreads")())
        return (lambda: vm["main"](*args)), {"engine_version": tvm.__version__, "threads_used": threads_used,
                                             "pool": pool_used}
    if engine in ("pytorch", "pytorch-cl"):
        import torch

        torch.set_num_threads(threads)
        saved = torch.load(path, weights_only=False)
        module, xs = saved["module"], [torch.from_numpy(a) for a in feed(saved["inputs"], inputs).values()]
        if engine == "pytorch-cl":
            module = module.to(memory_format=torch.channels_last)
            xs = [x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in xs]

        def run():
            with torch.inference_mode():
                return module(*xs)

        return run, {"engine_version": torch.__version__, "threads_used": torch.get_num_threads()}
    if engine == "onnxruntime":
        import onnxruntime as ort

        session, arrays = onnxruntime_session(path, threads, inputs=inputs)
        return (lambda: session.run(None, arrays)), {"engine_version": ort.__version__, "threads_used": threads}
    if engine in ("openvino", "openvino-f32"):
        compiled, arrays = openvino_model(path, threads, f32=engine == "openvino-f32", inputs=inputs)
        return (lambda: compiled(arrays)), openvino_facts(compiled)
    raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


def onnxruntime_session(path: Path, threads: int, profile_prefix: str | None = None, inputs: Path | None = None
                        ) -> tuple[Any, dict[str, Any]]:
    """An ONNX Runtime session on ``path`` as the peers benchmark runs it (every graph optimisation, ``threads``
    intra-op threads, sequential) and its feed (see ``feed``). With ``profile_prefix``, ONNX Runtime's profiler
    writes there."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix is not None:
        options.enable_profiling, options.profile_file_prefix = True, profile_prefix
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    specs = [(spec.name, spec.shape, onnx_dtype(spec.type)) for spec in session.get_inputs()]
    return session, feed(specs, inputs)


def feed(specs: Sequence[tuple[str, Sequence[int], str]], inputs: Path | None = None) -> dict[str, np.ndarray]:
    """Inputs by name for ``(name, shape, dtype)`` specs: ``inputs``' arrays (a ``.npz`` by input name), or without
    it drawn in order as tessera's artifacts draw theirs (seed 0), so that every engine sees one input; ValueError
    for a missing input or another shape."""
    from search.artifact import random_arrays

    names, shapes, dtypes = zip(*specs, strict=True)
    if inputs is None:
        return dict(zip(names, random_arrays(shapes, 0, dtypes), strict=True))
    with np.load(inputs, allow_pickle=False) as data:
        missing = [name for name in names if name not in data.files]
        if missing:
            raise ValueError(f"{inputs}: no array for input(s) {', '.join(missing)}")
        arrays = {name: data[name].astype(dtype) for name, dtype in zip(names, dtypes, strict=True)}
    for (name, array), shape in zip(arrays.items(), shapes, strict=True):
        if array.shape != tuple(shape):
            raise ValueError(f"{inputs}: input {name} has shape {array.shape}; the network reads {tuple(shape)}")
    return arrays


def openvino_model(path: Path, threads: int, *, f32: bool, inputs: Path | None = None
                   ) -> tuple[Any, dict[str, np.ndarray]]:
    """``path`` compiled by OpenVINO for the CPU as its users run batch-1 latency (``PERFORMANCE_HINT: LATENCY``),
    with ``threads`` inference threads and, with ``f32``, float32 inference (else the precision the plugin picks),
    and its feed (see ``feed``)."""
    os.environ["CI"] = "true"  # openvino-telemetry's one environment switch; only its model converter reports
    import openvino as ov

    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
              **({"INFERENCE_PRECISION_HINT": "f32"} if f32 else {})}
    compiled = ov.Core().compile_model(str(path), "CPU", config)
    specs = [(port.get_any_name(), list(port.get_shape()), port.get_element_type().to_dtype().name)
             for port in compiled.inputs]
    return compiled, feed(specs, inputs)


def openvino_facts(compiled: Any) -> dict[str, Any]:
    """What a compiled OpenVINO model ran with: version, threads, inference precision, and the CPU's optimisation
    capabilities (``BF16``, ``FP16`` where it computes them)."""
    import openvino as ov

    return {"engine_version": version("openvino"), "threads_used": int(compiled.get_property("INFERENCE_NUM_THREADS")),
            "precision": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
            "cpu_capabilities": list(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))}


def onnx_dtype(type_name: str) -> str:
    """The numpy dtype of an ONNX Runtime input type such as ``tensor(float)``; ``ValueError`` for the types tessera
    never feeds (its artifacts take float32 data and integer ids)."""
    if type_name not in ONNX_DTYPES:
        raise ValueError(f"an ONNX input of type {type_name}: only {', '.join(ONNX_DTYPES)} can be fed")
    return ONNX_DTYPES[type_name]


def time_runner(run: Callable[[], Any], number: int | None) -> tuple[float, int]:
    """One timing: a warm-up run, then ``number`` runs (default: enough for ``MIN_SECONDS``); mean ms per run."""
    start = time.perf_counter()
    run()
    once = time.perf_counter() - start
    if number is None:
        number = max(1, int(np.ceil(MIN_SECONDS / max(once, 1e-6))))
    start = time.perf_counter()
    for _ in range(number):
        run()
    return (time.perf_counter() - start) / number * 1e3, number


def output_arrays(value: Any) -> list[np.ndarray]:
    """An engine's result as a flat list of numpy arrays (TVM and torch tensors, arrays, nested tuples and lists)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, Mapping):  # OpenVINO's results, by output
        return output_arrays(list(value.values()))
    if hasattr(value, "numpy"):
        return [np.asarray(value.numpy())]
    return [array for item in value for array in output_arrays(item)]


def serve(engine: str, path: Path, threads: int, pool: str | None = None, inputs: Path | None = None) -> None:
    """Worker loop: load the network, print its facts as one JSON line, then answer each stdin line with one JSON
    line until stdin closes: ``time [NUMBER]`` with ``{"ms": ..., "number": ...}``, ``output FILE`` (saves the
    outputs as ``.npz``) with ``{"saved": FILE}``."""
    run, facts = load_runner(engine, path, threads, pool, inputs)
    print(json.dumps(facts), flush=True)
    for line in sys.stdin:
        words = line.split(maxsplit=1)
        if words and words[0] == "output":
            np.savez(words[1].strip(), *output_arrays(run()))
            print(json.dumps({"saved": words[1].strip()}), flush=True)
            continue
        ms, number = time_runner(run, int(words[1]) if len(words) > 1 else None)
        print(json.dumps({"ms": ms, "number": number}), flush=True)


class PeerWorker:
    """One ``serve`` worker process for ``contender``, the network loaded; ``time`` and ``outputs`` ask it.

    Between requests the process is stopped (``SIGSTOP``): threads an engine leaves busy after its run (TVM's own pool
    keeps its threads spinning and yielding for a while, for seconds beside other busy processes) must not load the
    machine while another contender is timed. It dies with the process that started it."""

    def __init__(self, contender: Contender, threads: int) -> None:
        command = [sys.executable, "-m", "experiments.peers", "serve", contender.engine, str(contender.path),
                   "--threads", str(threads), *(["--pool", contender.pool] if contender.pool else []),
                   *(["--inputs", str(contender.inputs)] if contender.inputs else [])]
        self.contender = contender
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, **thread_variables(threads, peers=True),
                                             **dict(contender.environment)},
                                        cwd=Path(__file__).resolve().parents[1], preexec_fn=die_with_parent)
        self.facts = self._answer()
        self._signal(signal.SIGSTOP)

    def _signal(self, signum: int) -> None:
        try:
            os.kill(self.process.pid, signum)
        except ProcessLookupError:
            pass  # it exited: the next request says so

    def _answer(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.contender.label}: the {self.contender.engine} worker exited "
                               f"(code {self.process.wait()}) before answering")
        return json.loads(line)

    def _ask(self, line: str) -> dict[str, Any]:
        self._signal(signal.SIGCONT)
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the worker died: _answer says so
        answer = self._answer()
        self._signal(signal.SIGSTOP)
        return answer

    def time(self, number: int | None) -> dict[str, Any]:
        return self._ask("time" + ("" if number is None else f" {number}"))

    def outputs(self, path: Path) -> list[np.ndarray]:
        self._ask(f"output {path}")
        with np.load(path) as saved:
            return [saved[f"arr_{i}"] for i in range(len(saved.files))]

    def close(self) -> None:
        self._signal(signal.SIGCONT)
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def interleaved_peers(contenders: list[Contender], *, rounds: int, threads: int,
                      echo: Callable[[str], None] = lambda line: None) -> dict[str, dict[str, Any]]:
    """Time every contender ``rounds`` times, in turns (see the module docstring); per label the median, quartiles,
    extremes and interquartile ``spread_ms`` of the round samples (ms), the runs per sample, ``max_error`` against
    the first contender's outputs and the engine's facts. One worker runs at a time: the others are stopped."""
    workers: list[PeerWorker] = []
    try:
        for contender in contenders:
            echo(f"loading {contender.label} ({contender.engine})")
            workers.append(PeerWorker(contender, threads))
        with tempfile.TemporaryDirectory(prefix="tessera-peers-") as scratch:
            outputs = [w.outputs(Path(scratch) / f"{n}.npz") for n, w in enumerate(workers)]
        errors = {w.contender.label: relative_error(out, outputs[0]) for w, out in zip(workers, outputs)}
        echo("max error against " + contenders[0].label + ": " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
        numbers: dict[str, int] = {}

        def timer(worker: PeerWorker) -> Callable[[], float]:
            def measure() -> float:
                time.sleep(SETTLE_SECONDS)
                answer = worker.time(numbers.get(worker.contender.label))
                numbers[worker.contender.label] = answer["number"]
                return answer["ms"]

            return measure

        def report(index: int, samples: dict[str, list[float]]) -> None:
            echo(f"round {index + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in samples.items()))

        samples = interleave({w.contender.label: timer(w) for w in workers}, rounds, report)
        return {w.contender.label: {**latency_summary(samples[w.contender.label]), "number": numbers[w.contender.label],
                                    "max_error": errors[w.contender.label], "engine": w.contender.engine,
                                    "threads": threads, **w.facts} for w in workers}
    finally:
        for worker in workers:
            worker.close()


def save_pytorch(mod, path: Path, model: str | None = None) -> Path:
    """Save ``mod`` (a zoo network, ``model`` its name) as a PyTorch module the ``pytorch`` engines load, with its
    inputs' names, shapes and dtypes; a zoo transformer as its users' library runs it
    (``search.zoo.torch_transformer``)."""
    import torch

    from search.zoo import is_transformer
    from search.zoo.torch_net import torch_module
    from search.zoo.torch_transformer import transformer_module

    inputs = [(p.name, [int(d) for d in p.ty.shape], str(p.ty.dtype)) for p in mod["main"].params]
    module = transformer_module(model, mod) if model and is_transformer(model) else torch_module(mod)
    torch.save({"module": module, "inputs": inputs}, path)
    return path


def save_onnx(mod, path: Path, model: str | None = None) -> Path:
    """Save ``mod`` (a zoo network, ``model`` its name) as the ONNX file the ``onnxruntime`` engine loads; a zoo
    transformer is written as exporters write it (``search.zoo.onnx.save_transformer``)."""
    import onnx

    from search.zoo import is_transformer
    from search.zoo.onnx.save import to_onnx
    from search.zoo.onnx.save_transformer import transformer_to_onnx

    onnx.save(transformer_to_onnx(model, mod) if model and is_transformer(model) else to_onnx(mod), str(path))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a timing worker for experiments.peers (see its docstring)")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("path", type=Path)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--pool", choices=POOLS, default=None)
    parser.add_argument("--inputs", type=Path, default=None)
    args = parser.parse_args(argv)
    serve(args.engine, args.path, args.threads, args.pool, args.inputs)


if __name__ == "__main__":
    main()
