"""The ``tessera`` command line: a thin layer over the Python API.

Each subcommand has a ``_add_<name>`` function that declares its arguments and a ``_run_<name>`` function that calls
public functions only (those that measure networks, in ``experiments.cli_measure``; what all share, in
``experiments.cli_args``). Errors a user can cause (bad files, unknown names, impossible plans) end as one
``error: ...`` line and exit code 2; any other exception is an internal error, one line and exit code 3; ``--debug``
(anywhere on the command line) shows the traceback instead. A solver that finds no finite-cost assignment exits 1.
SIGTERM and SIGHUP end a command as Ctrl-C does (``Terminated``, a ``KeyboardInterrupt``): what it was doing is
unwound, its temporary files removed, and it exits with 128 + the signal's number after one ``error:`` line.
"""

from __future__ import annotations

import argparse
import errno
import importlib.metadata
import json
import signal
import sys
import threading
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NoReturn

from experiments.cli_args import UsageError, add_input_shape, check_output_directory, check_output_file
from experiments.cli_measure import add_measure_commands
from search.runtime import DEFAULT_RUNTIME, POOLS
from search.threads import MAX_THREADS, reserve_pool
from solvers.errors import SolverError
from solvers.input_files import InputFileError
from solvers.problem import ProblemError

USAGE_ERROR = 2
INTERNAL_ERROR = 3


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors (a missing or malformed argument) are one ``error: ...`` line and exit code
    2, as every other bad input; its subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is, so that it unwinds as after Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class _Signals:
    """The handler of SIGTERM and SIGHUP during a command, keeping the signals it received: one raised inside a
    library's callback comes back as that library's error (TVM's FFI re-raises it as a ``RuntimeError``)."""

    received: list[int] = field(default_factory=list)

    def __call__(self, signum: int, frame: object) -> None:
        self.received.append(signum)
        raise Terminated(signum)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input rather than a bug in tessera."""
    from cost_models.cache import CacheError
    from cost_models.errors import CostSourceError, ModelError
    from experiments.config import ExperimentError
    from search.errors import SearchError

    return (ProblemError, SolverError, SearchError, ExperimentError, ModelError, CostSourceError, CacheError,
            UsageError, InputFileError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
            FileExistsError)


BAD_PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP})
"""Errors of a path the user gave (a name too long for the file system, a loop of symbolic links): bad input."""


PARSERS = (str(Path(json.__file__).parent), str(Path(tomllib.__file__).parent))
"""The standard library's JSON and TOML parsers: recursion that ends in them is an input nested too deeply."""


def _is_bad_input(exc: Exception) -> bool:
    return (isinstance(exc, _user_errors()) or (isinstance(exc, OSError) and exc.errno in BAD_PATH_ERRNOS)
            or (isinstance(exc, RecursionError) and _innermost_file(exc).startswith(PARSERS)))


def _innermost_file(exc: BaseException) -> str:
    trace = exc.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    return trace.tb_frame.f_code.co_filename if trace is not None else ""


# ---------------------------------------------------------------------------------------------------- solve
def _add_solve(sub: argparse._SubParsersAction) -> None:
    from solvers import SOLVERS

    p = sub.add_parser("solve", help="solve a problem file and print the solution as JSON")
    p.add_argument("problem", help="problem file: tessera's JSON (format in the README), .wcsp, .cfn or .uai")
    p.add_argument("--solver", default="auto", help=f"{', '.join(sorted(SOLVERS))} (default: auto)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds the solver may spend")
    p.add_argument("--bound", action="store_true", help="also compute the LP lower bound of the local polytope")
    p.add_argument("--out", help="write the plan (model, args, node -> candidate choices; the format 'tessera export "
                   "--plan' reads) with the solution summary to this JSON file")
    p.set_defaults(run=_run_solve)


def _run_solve(args: argparse.Namespace) -> int:
    from solvers import solve
    from solvers.formats import read_problem
    from solvers.problem import write_json_atomic

    if args.out:
        check_output_file(args.out, {"problem file": args.problem})
    problem = read_problem(args.problem)
    params = {} if args.time_limit is None else {"time_limit": args.time_limit}
    solution = solve(problem, args.solver, bound=args.bound, **params)
    result = solution.to_dict()
    if args.out:  # a plan file for `tessera export` that also keeps the solution summary
        summary = {k: v for k, v in result.items() if k != "assignment"}
        unit = {"vector_unit": problem.meta["vector_unit"]} if problem.meta.get("vector_unit") else {}
        auxiliary = set(problem.meta.get("auxiliary", ()))  # a measured problem's nodes that price shared transforms
        choices = {node: name for node, name in result["assignment"].items() if node not in auxiliary}
        plan = {"model": problem.meta.get("model", ""), "args": problem.meta.get("args", {}), **unit,
                "choices": choices, "solution": summary}
        write_json_atomic(args.out, plan)
    print(json.dumps(result, allow_nan=False))
    if not solution.assignment and solution.status == "infeasible":
        print(f"error: {args.solver} found no finite-cost assignment (status: {solution.status})", file=sys.stderr)
        return 1
    if not solution.assignment:
        print(f"error: {args.solver} found no finite-cost assignment and proved none impossible (status: "
              f"{solution.status}); give it more time (--time-limit) or another solver", file=sys.stderr)
        return 4
    return 0


# ---------------------------------------------------------------------------------------------------- convert
def _add_convert(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a problem between tessera's JSON and toulbar2's .wcsp / .cfn or UAI "
                                       "(.uai), by the files' suffixes (.gz, .xz, .bz2 compress)")
    p.add_argument("input", help="problem file to read: .json, .wcsp, .cfn or .uai")
    p.add_argument("output", help="problem file to write (replaced atomically): .json, .wcsp, .cfn or .uai")
    p.set_defaults(run=_run_convert)


def _run_convert(args: argparse.Namespace) -> int:
    from solvers.formats import format_of, read_problem, write_problem

    format_of(args.output)  # an unknown output format is refused before the input is read
    check_output_file(args.output, {"input file": args.input})
    problem = read_problem(args.input)
    write_problem(problem, args.output)
    offset = problem.meta.get("offset", 0.0)
    shifted = f"; offset {offset:g} kept in meta (the file's objective = cost + offset)" if offset else ""
    print(f"wrote {args.output}: {problem.num_nodes} nodes, {len(problem.edges)} edges{shifted}")
    return 0


# ---------------------------------------------------------------------------------------------------- generate
def _add_generate(sub: argparse._SubParsersAction) -> None:
    from solvers.generators import GENERATORS

    p = sub.add_parser("generate", help="write a seeded synthetic problem shaped like a real network")
    p.add_argument("kind", choices=list(GENERATORS),
                   help="chain, densenet (DenseNet-201-like), ssd, random or blocks (DenseNet-BC-like, another cost "
                        "law and (input, output layout) candidates)")
    p.add_argument("--seed", type=int, required=True, help="random seed (same seed, same file)")
    p.add_argument("--nodes", type=int, default=None, help="number of nodes, for chain (1000) and random (200)")
    p.add_argument("--candidates", type=int, default=8, help="candidates per tunable operator (default: 8)")
    p.add_argument("--out", required=True, help="problem JSON file to write")
    p.set_defaults(run=_run_generate)


def _run_generate(args: argparse.Namespace) -> int:
    from solvers.generators import generate

    check_output_file(args.out, {})
    problem = generate(args.kind, seed=args.seed, nodes=args.nodes, candidates=args.candidates)
    problem.save(args.out)
    print(f"wrote {args.out}: {args.kind}, {problem.num_nodes} nodes, {len(problem.edges)} edges")
    return 0


# ---------------------------------------------------------------------------------------------------- demo
def _add_demo(sub: argparse._SubParsersAction) -> None:
    from experiments.demo import DEMO

    p = sub.add_parser("demo", help=f"the whole loop on {DEMO.model} at {DEMO.image_size}x{DEMO.image_size}: measure, "
                                    "solve, export, check, and time the plan against uniform layouts (a few minutes "
                                    "from an empty cache)")
    p.add_argument("--out", default="tessera-demo",
                   help="directory for plan.json, problem.json, summary.json, artifact/ (default: tessera-demo)")
    p.add_argument("--cache", default=None, help="sqlite cost cache (default: ~/.cache/tessera/costs.sqlite)")
    p.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from cost_models.cache import DEFAULT_CACHE
    from experiments.demo import run_demo
    from experiments.progress import ProgressBar

    progress = ProgressBar()
    try:
        run_demo(args.out, cache=args.cache or DEFAULT_CACHE, echo=lambda line: print(line, flush=True),
                 progress=progress)
    finally:
        progress.close()
    return 0


# ---------------------------------------------------------------------------------------------------- compare
def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="solve the embedded DenseNet-201-like and SSD-like problems with every solver "
                                       "and print cost, gap and seconds per solver")
    from solvers import SOLVERS

    searching = ", ".join(name for name in sorted(SOLVERS) if SOLVERS[name].searches_to_optimality)
    p.add_argument("--time-limit", type=float, default=10.0,
                   help=f"seconds for the solvers that search until they prove optimality ({searching}; default: 10)")
    p.set_defaults(run=_run_compare)


def _run_compare(args: argparse.Namespace) -> int:
    from experiments.compare import LEGEND, compare, compare_settings, format_table
    from solvers.base import make_solver
    from solvers.generators import generate

    settings = compare_settings(args.time_limit)
    for name, params in settings.items():
        make_solver(name, **params)  # a bad limit is one error line, not a failing row per solver
    rows = []
    for kind, label in (("densenet", "densenet201-like"), ("ssd", "ssd-like")):
        problem = generate(kind, seed=0, candidates=8)
        print(f"{label}: {problem.num_nodes} nodes, {len(problem.edges)} edges, 8 candidates per operator", flush=True)
        rows += compare(problem, settings, instance=label)
    print()
    print(format_table(rows))
    print(f"\ncost and bound in microseconds of the synthetic cost model; {LEGEND}")
    return 0


# ---------------------------------------------------------------------------------------------------- export
def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="compile a model under a plan, check it against stock TVM and save it")
    p.add_argument("model", help="zoo model name or .onnx file")
    p.add_argument("--plan", required=True, help="plan JSON file, or a baseline: nchw, nhwc, nchw8c, nchw16c")
    p.add_argument("--out", required=True, help="artifact directory to write (library, plan.json, manifest.json)")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the plan file's, else 1)")
    p.add_argument("--image-size", type=int, default=None,
                   help="input height and width, or a BERT's sequence length (default: the plan file's, else "
                        "the model's own)")
    add_input_shape(p, "the plan file's, else the file's")
    p.add_argument("--threads", type=int, default=1, help="cores to compile for (default: 1)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the weights and of the check's input (default: the plan file's, else 0)")
    p.add_argument("--pool", choices=POOLS, default=DEFAULT_RUNTIME.pool,
                   help="thread pool the library runs its parallel loops on: tessera's, which holds its speed beside "
                        "other busy threads, or TVM's, threads bound to cores (default: tessera)")
    p.add_argument("--spin-us", type=int, default=DEFAULT_RUNTIME.spin_us,
                   help="on tessera's pool, how long a thread waiting for work spins before it sleeps, in "
                        "microseconds: 0 sleeps at once, which holds the speed better beside other busy threads and "
                        f"costs some on a quiet machine (default: {DEFAULT_RUNTIME.spin_us})")
    p.add_argument("--chunks-per-thread", type=int, default=DEFAULT_RUNTIME.chunks_per_thread,
                   help="on tessera's pool, how many chunks per thread each parallel loop is cut into, taken by "
                        "whichever thread is free: more chunks let the other threads take over more of a loop "
                        f"when one is descheduled (default: {DEFAULT_RUNTIME.chunks_per_thread})")
    p.add_argument("--spin-on-shared-cores", action="store_true",
                   help="on tessera's pool, spin before sleeping even while another runnable thread shares the "
                        "waiting thread's core (default: sleep at once there, which holds the speed beside other "
                        "busy threads)")
    p.add_argument("--max-error", type=float, default=None,
                   help="the largest relative error of the output against the stock fp32 build that the check "
                        "accepts (default: 0.001, or 0.02 for a plan with bf16 or int8 operators)")
    p.add_argument("--calibration-data", default=None, metavar="FILE.npz",
                   help="check on these inputs (an array per model input, by name: one sample or (samples, ...)) "
                        "instead of a random one: a plan with int8 nodes is quantised for inputs like them")
    p.set_defaults(run=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    import warnings

    from experiments.deploy import export_plan
    from search.export import save_artifact
    from search.precision import check_max_error

    check_output_directory(args.out, ("model.so", "plan.json", "manifest.json"),
                            {"plan file": args.plan, "model file": args.model,
                             "calibration data": args.calibration_data})
    check_max_error(args.max_error)
    runtime = replace(DEFAULT_RUNTIME, pool=args.pool, spin_us=args.spin_us,
                      chunks_per_thread=args.chunks_per_thread, spin_on_shared_cores=args.spin_on_shared_cores)
    if not 1 <= args.threads <= MAX_THREADS:
        raise UsageError(f"--threads must be an integer from 1 to {MAX_THREADS} (cores to compile for), got "
                         f"{args.threads}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        compiled = export_plan(args.model, args.plan, batch=args.batch, image_size=args.image_size,
                               input_shape=args.input_shape, threads=args.threads, seed=args.seed,
                               runtime=runtime, max_error=args.max_error, calibration_data=args.calibration_data)
    for warning in caught:
        print(f"note: {warning.message}", file=sys.stderr)
    save_artifact(compiled, args.out)
    m, check = compiled.manifest, compiled.manifest["numerical_check"]
    print(f"wrote {args.out}: {len(compiled.plan.choices)} nodes, {m['kernels']} kernels, {m['layout_transforms']} "
          f"layout transforms, relative error {check['relative_error']:.2g} (<= {check['tolerance']:g})"
          + (f", {len(m['bf16_nodes'])} nodes in bf16" if m["bf16_nodes"] else "")
          + (f" ({len(m['bf16_values'])} of them writing bf16 values)" if m["bf16_values"] else "")
          + (f", {len(m['int8_nodes'])} in int8" if m["int8_nodes"] else "")
          + (f" on {check['samples']} calibration samples" if "samples" in check else ""))
    return 0


# ---------------------------------------------------------------------------------------------------- run
def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="time an exported artifact on a random input")
    p.add_argument("artifact", help="directory written by 'tessera export'")
    p.add_argument("--repeat", type=int, default=10, help="timed repeats (default: 10)")
    p.add_argument("--threads", type=int, default=None, help="TVM_NUM_THREADS (default: the artifact's)")
    p.add_argument("--pool", choices=POOLS, default=None,
                   help="thread pool for the parallel loops, this run only (default: the artifact's)")
    p.add_argument("--spin-us", type=int, default=None,
                   help="tessera's pool's spin before sleeping, this run only (default: the artifact's; see export)")
    p.add_argument("--chunks-per-thread", type=int, default=None,
                   help="tessera's pool's chunks per thread of each parallel loop, this run only (default: the "
                        "artifact's; see export)")
    p.add_argument("--json", action="store_true", help="print the measurement as JSON")
    p.set_defaults(run=_run_run)


def _run_run(args: argparse.Namespace) -> int:
    from search.artifact import time_artifact

    latency = time_artifact(args.artifact, repeat=args.repeat, threads=args.threads, pool=args.pool,
                            spin_us=args.spin_us, chunks_per_thread=args.chunks_per_thread)
    if args.json:
        print(json.dumps(latency.to_dict(), allow_nan=False))
    else:
        threads = (f"threads {latency.runtime_threads} (TVM_NUM_THREADS={latency.threads})" if latency.pool == "tvm"
                   else f"threads {latency.threads} on tessera's pool")
        print(f"median {latency.median_ms:.4g} ms, spread (IQR) {latency.spread_ms:.3g} ms, min {latency.min_ms:.4g} "
              f"ms, max {latency.max_ms:.4g} ms over {latency.repeat} x {latency.number} runs, {threads}")
    return 0


# ---------------------------------------------------------------------------------------------------- show
def _add_show(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="draw a plan: each operator's layouts, schedule and cost, and the layout "
                                    "transforms on the edges (SVG or PNG)")
    p.add_argument("plan", help="plan JSON file, or a directory holding plan.json (an artifact, tune's output)")
    p.add_argument("--out", required=True, help="picture to write: .svg or .png")
    p.add_argument("--problem", default=None,
                   help="cost problem pricing the plan (default: problem.json beside the plan, or above an artifact; "
                        "without one, layouts and schedules only)")
    p.set_defaults(run=_run_show)


def _run_show(args: argparse.Namespace) -> int:
    from experiments.show import draw_plan

    drawing = draw_plan(args.plan, args.out, problem=args.problem)
    if drawing.note:
        print(f"note: {drawing.note}", file=sys.stderr)
    costs = f"costs from {drawing.problem}" if drawing.problem else "no costs (no problem file)"
    print(f"wrote {drawing.path}: {drawing.nodes} nodes, {drawing.conversions} layout conversions, {costs}")
    return 0


# ---------------------------------------------------------------------------------------------------- models
def _add_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the model zoo: input size, conv2d and dense counts, GFLOPs")
    p.add_argument("models", nargs="*", metavar="MODEL", help="zoo names or .onnx files (default: the whole zoo)")
    add_input_shape(p, "batch 1 at the model's own size")
    p.set_defaults(run=_run_models)


def _run_models(args: argparse.Namespace) -> int:
    from search.zoo import MODELS, describe

    names = args.models or list(MODELS)
    rows = []
    for name in names:
        shapes, stats = describe(name, args.input_shape)
        size = _input_size(list(shapes.values()))
        about = MODELS[name].description if name in MODELS else "ONNX file"
        rows.append((name, size, f"{stats.conv2d}", f"{stats.dense}", f"{stats.matmul}", f"{stats.gflops:.3g}",
                     about))
    header = ("model", "input", "conv2d", "dense", "matmul", "GFLOPs", "description")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:6], widths[1:])] + [row[6]]
        print("  ".join(cells))
    print("GFLOPs: 2 x multiply-accumulates of conv2d, dense (matmul by a constant weight) and matmul (of two "
          "activations, as in attention) at the listed input size (batch 1 unless --input-shape says otherwise)")
    return 0


def _input_size(shapes: list[tuple[int, ...]]) -> str:
    """``224`` for one square image input, ``48x320`` for another image, else every input's full shape."""
    if len(shapes) == 1 and len(shapes[0]) == 4:
        height, width = shapes[0][2:]
        return f"{height}" if height == width else f"{height}x{width}"
    return " ".join("x".join(map(str, shape)) for shape in shapes)


# ---------------------------------------------------------------------------------------------------- ablate / report
def _add_ablate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ablate", help="run an experiment grid (TOML) on Ray, tracked in MLflow; reruns resume")
    p.add_argument("config", help="experiment TOML file (format in experiments/config.py)")
    p.add_argument("--address", default=None, help="join this Ray cluster (default: start a local one)")
    p.add_argument("--serial", action="store_true", help="run the trials one by one in this process, without Ray")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default: sqlite:///mlflow.db here)")
    p.set_defaults(run=_run_ablate)


def _run_ablate(args: argparse.Namespace) -> int:
    from experiments.config import load_config
    from experiments.runner import run_experiment

    config = load_config(args.config)
    summary = run_experiment(config, tracking_uri=args.tracking_uri, address=args.address, serial=args.serial)
    print(f"{config.name}: {summary.trials} trials, {summary.skipped} already finished, {summary.finished} finished "
          f"now, {summary.failed} failed, {summary.seconds:.1f} s (parent run {summary.parent_run_id})")
    return 0


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="tables (markdown, CSV) and plots of an experiment's runs in MLflow")
    p.add_argument("experiment", help="experiment name (the config's name)")
    p.add_argument("--out", default=None, help="directory to write (default: report-<experiment>)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default: sqlite:///mlflow.db here)")
    p.set_defaults(run=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from experiments.report import write_report

    files = write_report(args.experiment, args.out or f"report-{args.experiment}", args.tracking_uri)
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


# ---------------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tessera", description="Per-operator layout and schedule search for deep-learning networks.")
    parser.add_argument("--version", action="version", version=f"tessera {importlib.metadata.version('tessera')}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_solve(sub)
    _add_convert(sub)
    _add_models(sub)
    _add_export(sub)
    _add_run(sub)
    _add_show(sub)
    add_measure_commands(sub)
    _add_generate(sub)
    _add_demo(sub)
    _add_compare(sub)
    _add_ablate(sub)
    _add_report(sub)
    _debug_anywhere(parser)
    return parser


def _debug_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let every subcommand (and theirs) take ``--debug`` too, leaving the top-level value when it is absent."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                     help="show tracebacks instead of one-line errors")
                _debug_anywhere(command)


def _interrupted(signum: int) -> int:
    print(f"error: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
    return 128 + signum


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    reserve_pool()  # before any command first runs TVM: its pool is sized once, a command may ask for fewer threads
    main_thread = threading.current_thread() is threading.main_thread()  # the only one that may handle signals
    handler = _Signals()
    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGHUP)
                if main_thread}
    try:
        return args.run(args)
    except KeyboardInterrupt as exc:
        return _interrupted(exc.signum if isinstance(exc, Terminated) else signal.SIGINT)
    except BrokenPipeError:  # e.g. `tessera solve ... | head`: the reader left, nothing more to say
        sys.stderr.close()
        return 0
    except Exception as exc:
        if handler.received:  # a signal, wrapped by a library it was raised in
            return _interrupted(handler.received[0])
        if args.debug:
            raise
        if _is_bad_input(exc):
            message = (f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) else
                       f"an input is nested too deeply to read ({exc})" if isinstance(exc, RecursionError) else
                       str(exc))
            print(f"error: {message}", file=sys.stderr)
            return USAGE_ERROR
        # a bug in tessera or a library under it, not the user's input
        print(f"error: internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback",
              file=sys.stderr)
        return INTERNAL_ERROR
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
