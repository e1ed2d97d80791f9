"""The ``tessera`` subcommands that measure networks and keep their costs: ``extract``, ``tune``, ``costmodel`` and
``cache`` (arguments in ``_add_<name>``, work in ``_run_<name>``, as in ``experiments.cli``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.cli_args import UsageError, add_input_shape, check_output_directory, check_output_file

if TYPE_CHECKING:
    from cost_models.cache import CostCache
    from cost_models.exchange import CacheStats


# ---------------------------------------------------------------------------------------------------- extract / tune
def _add_measurement_args(p: argparse.ArgumentParser) -> None:
    """Arguments shared by extract and tune: the model's input, the candidate space, threads, the cost cache, the
    cost source (the sources of ``cost_models.sources.COST_SOURCES``) and a flag per source parameter
    (``cost_models.sources.source_parameters``)."""
    from cost_models.sources import COST_SOURCES, default_source, source_parameters

    p.add_argument("model", help="zoo model name or .onnx file")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: 1)")
    p.add_argument("--image-size", type=int, default=None,
                   help="input height and width, or a BERT's sequence length (default: the model's own)")
    add_input_shape(p, "the file's; a dynamic batch is 1")
    p.add_argument("--seed", type=int, default=0, help="seed of the model's random weights (default: 0)")
    p.add_argument("--threads", type=int, default=None, help="runtime threads (default: every usable core)")
    p.add_argument("--space-size", type=int, default=None,
                   help="candidates per kernel node before the uniform baselines' are added (a layout kind such "
                        "as a concat keeps all of its layouts; default: 50)")
    p.add_argument("--layouts", default=None,
                   help="comma-separated activation layouts to search (default: NCHW,NHWC,NCHW8c,NCHW16c,NCHW32c; "
                        "a linear layer's rows always NC, in bf16 rows where bf16 is searched, blocked where CN{c}c "
                        "is named, e.g. CN16c)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "int8", "auto"],
                   help="what the kernels compute in: fp32, bf16 or int8 where an operator has such a kernel, or auto "
                        "(any, per operator, by cost); bf16 needs a CPU with avx512_bf16 or amx_bf16, int8 one with "
                        "avx512_vnni or amx_int8 and --calibration-data (default: fp32)")
    p.add_argument("--max-error", type=float, default=None,
                   help="with bf16 or int8 candidates: the largest relative error of a plan's output against the fp32 "
                        "build, measured on the exported network (on the calibration inputs, if given); operators "
                        "are given up to a more accurate precision until it holds (default: 0.02)")
    p.add_argument("--calibration-data", default=None, metavar="FILE.npz",
                   help="the model's inputs as the deployment sees them (an array per input, by name: one sample or "
                        "(samples, ...)): the fp32 network runs on them to find each int8 kernel's input range, "
                        "and every plan's error is checked on them; without it int8 is not offered")
    p.add_argument("--calibration-method", default="minmax", choices=["minmax", "percentile"],
                   help="an int8 input's range: its minimum and maximum on the calibration inputs, or their 0.01st "
                        "and 99.99th percentiles (default: minmax)")
    p.add_argument("--cache", default=None, help="sqlite cost cache (default: ~/.cache/tessera/costs.sqlite)")
    p.add_argument("--costs", default=default_source(), choices=list(COST_SOURCES),
                   help="; ".join(f"{name}: {cls.description}" for name, cls in COST_SOURCES.items())
                   + f" (default: selective where tessera ships a cost model for the host's vector unit, else "
                     f"measured; here {default_source()})")
    for param in source_parameters().values():
        p.add_argument(param.declared.flag, type=param.type, default=None, choices=param.declared.choices or None,
                       help=param.help)
    p.add_argument("--transforms", default="shared", choices=("shared", "pairwise"),
                   help="price each layout conversion once, as the exported module runs it (shared: auxiliary nodes "
                        "with hard constraints, which the auto solver proves) or every read on its own (pairwise: "
                        "smaller problems the heuristics handle better) (default: shared)")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="measure on this Ray cluster, joined with Ray's token authentication (RAY_AUTH_TOKEN or "
                        "~/.ray/auth_token): its nodes offering the timing_slot resource build and time what the cache "
                        "lacks, every result written into the cache here as it arrives (see docs/cluster.md)")
    p.add_argument("--key-by-node", action="store_true",
                   help="with --address: nodes whose CPU or versions differ from this machine's time too, for records "
                        "kept under their own context (the problem uses this machine's only)")


def _measurement_kwargs(args: argparse.Namespace) -> dict:
    from cost_models.cache import DEFAULT_CACHE
    from cost_models.sources import cost_source, source_parameters
    from experiments.progress import ProgressBar
    from search.precision import check_max_error, check_precision
    from search.zoo import check_model

    check_model(args.model, batch=args.batch, image_size=args.image_size, seed=args.seed,
                input_shape=args.input_shape)  # before a cost cache is opened or a cluster joined
    check_precision(args.precision)
    check_max_error(args.max_error)
    options = {name: getattr(args, param.declared.key) for name, param in source_parameters().items()}
    source = cost_source(args.costs, **{param: value for param, value in options.items() if value is not None})
    return {"batch": args.batch, "image_size": args.image_size, "input_shape": args.input_shape, "seed": args.seed,
            "threads": args.threads, "space_size": args.space_size, "layouts": args.layouts,
            "precision": args.precision, "max_error": args.max_error,
            "calibration_data": args.calibration_data, "calibration_method": args.calibration_method,
            "cache": args.cache or DEFAULT_CACHE, "costs": source, "transforms": args.transforms,
            "address": args.address, "key_by_node": args.key_by_node, "progress": ProgressBar()}


def _measurement_inputs(args: argparse.Namespace) -> dict[str, str | None]:
    """The files extract and tune read, which their outputs must not overwrite."""
    from cost_models.cache import DEFAULT_CACHE

    cache = str(Path(args.cache or DEFAULT_CACHE).expanduser())
    return {"model file": args.model, "cost-model file": args.cost_model, "cost cache": cache,
            "calibration data": args.calibration_data}


def _add_extract(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("extract", help="measure a model's candidate space (what the cache lacks) into a problem file")
    _add_measurement_args(p)
    p.add_argument("--out", required=True, help="problem JSON file to write")
    p.set_defaults(run=_run_extract)


def _run_extract(args: argparse.Namespace) -> int:
    from experiments.extraction import extract

    check_output_file(args.out, _measurement_inputs(args))
    kwargs = _measurement_kwargs(args)
    try:
        extracted = extract(args.model, **kwargs)
    finally:
        kwargs["progress"].close()
    if extracted.int8_note:
        print(f"note: {extracted.int8_note}", file=sys.stderr)
    extracted.problem.save(args.out)
    p = extracted.problem
    print(f"wrote {args.out}: {p.num_nodes} nodes, {len(p.edges)} edges, {sum(p.domain_sizes)} candidates; "
          f"{extracted.tasks} measurements needed, {extracted.new} new, {extracted.failed} failed")
    return 0


def _add_tune(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="measure, solve, export, check and time a model's plan against the baselines")
    _add_measurement_args(p)
    from solvers import SOLVERS

    p.add_argument("--solver", default="auto",
                   help=f"{', '.join(sorted(SOLVERS))}, or several comma-separated, each plan timed beside the "
                        "baselines (default: auto)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds each solver may spend")
    p.add_argument("--repeat", type=int, default=10,
                   help="interleaved timing rounds of the plan and each baseline (default: 10)")
    p.add_argument("--calibrate", type=int, default=1, metavar="N",
                   help="up to N calibration rounds: profile the exported plans inside the network, price the "
                        "problem with those in-network times and solve again until the plan stops changing "
                        "(default: 1; 0 predicts from isolated timings alone)")
    from search.plan import BASELINES, UNIFORM

    p.add_argument("--baselines", default=None, metavar="LIST",
                   help=f"uniform plans to time beside the plan (their candidates are measured too), comma-separated "
                        f"from {', '.join(UNIFORM)}, or none (default: {','.join(BASELINES)})")
    p.add_argument("--tracking-uri", default=None,
                   help="also log the run to this MLflow store (e.g. sqlite:///mlflow.db): the plans' latencies and "
                        "each calibration round's predictions and measurements, in the experiment tessera-tune")
    p.add_argument("--out", required=True, help="directory for plan.json, problem.json, summary.json, artifact/")
    p.set_defaults(run=_run_tune)


def _run_tune(args: argparse.Namespace) -> int:
    from experiments.tracking_store import check_tracking_uri
    from experiments.tune import tune
    from search.artifact import check_timing

    check_output_directory(args.out, ("problem.json", "plan.json", "plan.svg", "summary.json", "artifact", "plans"),
                            _measurement_inputs(args))
    check_timing(args.repeat)  # rounds of timing, as many as `tessera run` takes
    baselines = _baselines(args.baselines)
    if args.tracking_uri:
        check_tracking_uri(args.tracking_uri, create=True)  # a bad store is an error now, not after the tuning
    kwargs = _measurement_kwargs(args)
    try:
        summary = tune(args.model, args.out, solver=args.solver, time_limit=args.time_limit, repeat=args.repeat,
                       calibrate=args.calibrate, baselines=baselines, echo=lambda line: print(line, flush=True),
                       **kwargs)
    finally:
        kwargs["progress"].close()
    if args.tracking_uri:
        from experiments.tracking import TUNE_EXPERIMENT, log_tune

        run_id = log_tune(summary, args.tracking_uri)
        print(f"logged to {args.tracking_uri}: experiment {TUNE_EXPERIMENT}, run {run_id}")
    return 0


def _baselines(value: str | None) -> tuple[str, ...] | None:
    """``--baselines``: None for the default, () for none, else the names checked."""
    from search.plan import check_baselines

    if value is None:
        return None
    if value.strip().lower() == "none":
        return ()
    return check_baselines([name.strip() for name in value.split(",")])


# ---------------------------------------------------------------------------------------------------- costmodel
def _add_costmodel(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("costmodel", help="train or evaluate the XGBoost cost model on the cost cache")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, helptext in (("train", "fit a model on what the cache holds of some zoo networks' spaces"),
                           ("eval", "metrics of a model on held-out networks (nodes of seen workloads left out)")):
        q = actions.add_parser(name, help=helptext)
        q.add_argument("--models", required=name == "eval", help="comma-separated zoo networks")
        q.add_argument("--cache", default=None, help="sqlite cost cache (default: ~/.cache/tessera/costs.sqlite)")
        q.add_argument("--threads", type=int, default=None, help="threads the timings were taken with")
        q.add_argument("--layouts", default=None, help="the layouts the spaces were measured with (default: extract's)")
        q.add_argument("--space-size", type=int, default=None, help="candidates per node (default: extract's)")
        add_input_shape(q, "each model's own")
        if name == "train":
            q.add_argument("--out", required=True, help="model file to write (JSON)")
            q.add_argument("--objective", default="regression", choices=("regression", "rank"),
                           help="squared error on log time, or pairwise ranking within each node (default: regression)")
            q.add_argument("--seed", type=int, default=0, help="training seed (default: 0)")
            q.add_argument("--shipped", action="store_true",
                           help="train on the records tessera ships for this host's vector unit too (this machine's "
                                "own time wins for a task both have); without --models, on those alone")
        else:
            q.add_argument("--model", required=True, nargs="+", help="model file(s) to evaluate")
    p.set_defaults(run=_run_costmodel)


def _run_costmodel(args: argparse.Namespace) -> int:
    from cost_models.cache import DEFAULT_CACHE, CacheError
    from experiments.costmodel import evaluate_on, train
    from search.zoo.shapes import input_shapes

    input_shapes(args.input_shape)  # the command line is checked before any file is looked at
    models = [m.strip() for m in (args.models or "").split(",") if m.strip()]
    if args.action == "train" and not models and not args.shipped:
        raise UsageError("name the networks whose measurements to train on (--models), or give --shipped")
    cache = Path(args.cache or DEFAULT_CACHE).expanduser()
    if models and not cache.is_file():  # read, never created
        raise CacheError(f"{cache}: no such cost cache")
    space = {"threads": args.threads, "layouts": args.layouts, "space_size": args.space_size,
             "input_shape": args.input_shape}
    if args.action == "train":
        check_output_file(args.out, {"cost cache": str(cache), **{f"model file {m}": m for m in models}})
        if not 0 <= args.seed < 2**31:
            raise UsageError(f"--seed must be an integer from 0 to 2**31 - 1, got {args.seed}")
        model, data = train(cache, models, args.out, objective=args.objective, seed=args.seed, shipped=args.shipped,
                            **space)
        for network in data:
            print(f"{network.model}: {len(network.records)} measured tasks, {network.missing} not in the cache")
        if args.shipped:
            print(f"shipped records: {', '.join(model.provenance['shipped']) or 'none for this vector unit'}")
        print(f"wrote {args.out}: {args.objective} model on {model.provenance['records']} records "
              f"({model.provenance['groups']} workload groups)")
        return 0
    rows = [(path, row) for path in args.model for row in evaluate_on(path, models, cache, **space)]
    print("| model file | network | pairwise | top-1 | top-5 | R^2 log | nodes | left out (seen) |")
    print("|---|---|---|---|---|---|---|---|")
    for path, row in rows:
        r2 = "-" if row["r2_log"] is None else f"{row['r2_log']:.3f}"
        print(f"| {path} | {row['model']} | {row['pairwise_accuracy']:.3f} | {row['top1']:.3f} | {row['top5']:.3f} "
              f"| {r2} | {row['groups']} | {row['seen_nodes_left_out']} |")
    return 0


# ---------------------------------------------------------------------------------------------------- cache
def _add_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the cost cache: statistics, export and import as JSON Lines, merge caches")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("stats", help="records by machine context and by measured kind, failures, dates")
    q = actions.add_parser("export", help="write every record to a JSON Lines file (.gz compresses)")
    q.add_argument("file", help="file to write (replaced atomically)")
    q = actions.add_parser("import", help="add the records of a file 'export' wrote")
    q.add_argument("file", help="JSON Lines file (.gz: compressed)")
    q = actions.add_parser("merge", help="add the records of other cost caches")
    q.add_argument("caches", nargs="+", help="sqlite cost caches to read (not changed)")
    for q in actions.choices.values():
        q.add_argument("--cache", default=None, help="sqlite cost cache (default: ~/.cache/tessera/costs.sqlite)")
    p.set_defaults(run=_run_cache)


def _run_cache(args: argparse.Namespace) -> int:
    from cost_models.cache import DEFAULT_CACHE, CacheError, CostCache

    writes = args.action in ("import", "merge")
    cache = CostCache(args.cache or DEFAULT_CACHE, read_only=not writes)
    if not writes and not cache.path.is_file():
        raise CacheError(f"{cache.path}: no such cost cache")
    try:
        return _cache_action(args, cache)
    finally:
        cache.close()  # a writer's write-ahead log folded back and removed: nothing left beside the cache


def _cache_action(args: argparse.Namespace, cache: CostCache) -> int:
    from cost_models import exchange

    if args.action == "stats":
        for line in _stats_lines(cache.path, exchange.stats(cache)):
            print(line)
        return 0
    if args.action == "export":
        print(f"wrote {args.file}: {exchange.export_records(cache, args.file)} records")
        return 0
    if args.action == "import":
        counts = exchange.import_records(cache, exchange.read_records(args.file))
    else:
        counts = exchange.merge_caches(cache, args.caches)
    print(f"{cache.path}: {counts.read} records read, {counts.added} added, {counts.replaced} replaced, "
          f"{counts.kept} kept (a success beats a failure, else the newer measurement wins)")
    return 0


def _stats_lines(path: Path, s: CacheStats) -> list[str]:
    """``tessera cache stats``' lines for the ``CacheStats`` ``s`` of the cache at ``path``."""
    import time

    def day(seconds: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))

    dates = f", measured {day(s.first)} to {day(s.last)}" if s.records else ""
    lines = [f"{path}: {s.records} records, {s.failed} failed{dates}"]
    for title, counts in (("by machine context", s.contexts), ("by kind", s.kinds)):
        lines += [f"{title}:", *(f"  {count:8d}  {name}" for name, count in counts.items())]
    return lines


def add_measure_commands(sub: argparse._SubParsersAction) -> None:
    """Declare ``extract``, ``tune``, ``costmodel`` and ``cache``."""
    _add_extract(sub)
    _add_tune(sub)
    _add_costmodel(sub)
    _add_cache(sub)
