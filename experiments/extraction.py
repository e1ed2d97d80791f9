"""A network's measured cost problem: load the network, measure what the cost cache lacks of its candidate space and
price it into a ``solvers.Problem`` (``extract``), kept with how it was made (``Extracted``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cost_models.cache import DEFAULT_CACHE, DEFAULT_TIMING
from experiments.settings import Settings
from search.errors import SearchError
from search.precision import check_max_error, check_precision

if TYPE_CHECKING:
    import tvm

    from cost_models.sources import CostSource
    from search.export import CheckInputs
    from search.graph import OpGraph
    from search.plan import Plan
    from search.zoo.shapes import ShapesLike
    from solvers.problem import Problem

TRANSFORMS = ("shared", "pairwise")


@dataclass(frozen=True)
class Extracted:
    """A measured problem and how it was made: the graph, the model's name and load arguments, the run's settings,
    the searched ``layouts``, ``space_size`` and ``precision`` with its error budget ``max_error`` (None: the export
    check's default), where the costs came from (``costs``, also the problem's
    ``meta["costs"]``), and measurement counts (``tasks`` distinct measurements needed, ``new`` of them measured now,
    ``failed`` failures, in ``seconds``, of which ``spent`` went to builds and timings: ``CostProvider.spent``); the
    uniform plans whose candidates the space holds (``baselines``); the calibration inputs the graph's int8 ranges
    came from, with the stock build's outputs on them (``calibration``: what the plans' error is checked on), and
    ``int8_note``, why a search that could use int8 did not (no calibration inputs; "" otherwise)."""

    graph: OpGraph
    problem: Problem
    model: str
    args: dict[str, Any]
    settings: Settings
    layouts: tuple[str, ...]
    space_size: int
    costs: dict[str, Any]
    tasks: int
    new: int
    failed: int
    seconds: float
    precision: str = "fp32"
    max_error: float | None = None
    baselines: tuple[str, ...] = ()
    spent: dict[str, float] = field(default_factory=dict)
    calibration: CheckInputs | None = None
    int8_note: str = ""

    def plan(self, solution: Any) -> Plan:
        """A solver's solution of this problem as the ``search.plan.Plan`` that ``search.export.export`` compiles
        (the auxiliary transform nodes left out, the model's name and load arguments recorded)."""
        from search.plan import plan_from_assignment

        return plan_from_assignment(solution.assignment, self.model, self.args,
                                    auxiliary=self.problem.meta.get("auxiliary", ()), graph=self.graph)


def load_network(model: str | tvm.IRModule, name: str | None = None, *, batch: int | None = None,
                 image_size: int | None = None, seed: int = 0, input_shape: ShapesLike = None):
    """(graph, name, args) of a zoo name / .onnx path (see ``search.zoo.load_model`` for the shape arguments), or of
    a Relax module (labelled ``name``). ``args`` are what reloads the same network: ``batch``, ``image_size`` (of
    the first input) and ``seed``, and ``input_shape`` (as text) when it was given."""
    from search.graph import extract_graph
    from search.zoo import input_shapes, load_model

    shapes = input_shapes(input_shape)
    if isinstance(model, str):
        mod = load_model(model, batch=batch, image_size=image_size, seed=seed, input_shape=shapes)
        label = name or model
    else:
        mod, label = model, name or "model"
    graph = extract_graph(mod)
    shape = graph.inputs[0][1]
    given = {"input_shape": [str(s) for s in shapes]} if shapes else {}
    return graph, label, {"batch": int(shape[0]), "image_size": int(shape[-1]), "seed": seed, **given}


def extract(
    model: str | tvm.IRModule,
    *,
    name: str | None = None,
    batch: int | None = None,
    image_size: int | None = None,
    input_shape: ShapesLike = None,
    seed: int = 0,
    threads: int | None = None,
    space_size: int | None = None,
    layouts: Sequence[str] | str | None = None,
    cache: str | Path = DEFAULT_CACHE,
    costs: CostSource | str | None = None,
    transforms: str = "shared",
    progress: Callable[[Any], None] | None = None,
    address: str | None = None,
    key_by_node: bool = False,
    baselines: Sequence[str] | None = None,
    precision: str = "fp32",
    max_error: float | None = None,
    calibration_data: str | Path | None = None,
    calibration_method: str = "minmax",
) -> Extracted:
    """Measure (what ``cache`` lacks of) ``model``'s candidate space and build its cost problem.

    Parameters
    ----------
    model : str or tvm.IRModule
        A zoo name or .onnx path (loaded with ``batch``, ``image_size`` or ``input_shape``, and ``seed``; see
        ``search.zoo.load_model``), or a Relax module in the zoo's vocabulary, labelled ``name``.
    threads, seed, cache
        The run's ``Settings``: runtime threads kernels are timed with (default: every usable core; set before TVM
        starts its thread pool), the seed of the model's random weights, the sqlite cost cache (created if missing).
    space_size, layouts, baselines, precision
        See ``search.space.tuning_space`` (defaults ``DEFAULT_SPACE_SIZE``, ``DEFAULT_LAYOUTS``, the uniform
        plans ``tune`` times and fp32; ``search.precision``).
    max_error : float, optional
        The largest relative output error a plan may have against the fp32 build: what ``tune`` holds its plans to
        (``experiments.budget``) and their exports are checked against; default ``search.export``'s check.
    calibration_data, calibration_method
        A ``.npz`` of the model's inputs (``search.activation_ranges.load_calibration``) and how ranges are taken from
        them (``minmax`` or ``percentile``): the operators that have int8 kernels get their input's range, so that
        ``precision`` ``int8`` or ``auto`` may run them in int8, and every plan's error is checked on these inputs.
        Without it int8 is not offered (``Extracted.int8_note`` says so); ``precision="int8"`` is refused.
    costs : CostSource or str
        Where costs come from (``cost_models.sources``): a source's name, or a source with its parameters, such as
        ``XGBoostSource("model.json")``; by default ``"selective"`` where tessera ships a cost model for the host's
        vector unit, else ``"measured"`` (``cost_models.sources.default_source``).
    transforms : {"shared", "pairwise"}
        How layout transforms are priced (``cost_models.pricing``): each conversion once, as the module runs it (the
        default: auxiliary nodes with hard constraints, which the auto solver proves and the pbqp and greedy
        heuristics handle less well), or every read on its own (pairwise: smaller problems; it overcounts a value read
        several times in one layout).
    progress : callable, optional
        Receives the cost provider's progress events (see ``experiments.progress.ProgressBar``).
    address : str, optional
        ``HOST:PORT`` of a Ray cluster to measure on (``cost_models.cluster_costs``): the tasks the cache lacks are
        built and timed on its nodes offering the ``timing_slot`` resource, every result written into ``cache`` here
        as it arrives; joined with Ray's token authentication once the network is loaded.
    key_by_node : bool
        With ``address``: nodes whose CPU or versions differ from this machine's time too, for records kept under
        their own context (the problem uses this machine's only); without it they are refused.

    Raises
    ------
    SearchError
        Unknown model, bad sizes, threads, layouts, space size or precision (bf16 or int8 on a CPU without their
        instructions, int8 without calibration data); a bad calibration file; ``key_by_node`` without ``address``.
    CostSourceError
        An unknown cost source or one that cannot open: a bad parameter, an unusable cache or model file, a cluster
        that cannot be joined or measured on (``cost_models.cluster.ClusterError``).
    """
    from dataclasses import replace

    from cost_models.cluster import Cluster
    from cost_models.sources import cost_source, default_source, refuse_cluster
    from search import space as spaces
    from search.activation_ranges import METHODS, input_ranges, load_calibration
    from search.calibrated import calibrated, int8_capable
    from search.export import check_inputs
    from search.kinds import KINDS
    from search.plan import check_baselines
    from search.precision import int8_settings

    source = cost_source(default_source() if costs is None else costs)
    if transforms not in TRANSFORMS:
        raise SearchError(f"transforms must be one of {', '.join(TRANSFORMS)}, got {transforms!r}")
    if key_by_node and address is None:
        raise SearchError("key_by_node (--key-by-node) applies to measuring on a cluster; give its address (--address)")
    cluster = {} if address is None else {"cluster": Cluster(address, key_by_node)}
    if cluster:
        refuse_cluster(source)
    settings = Settings.start(threads, timing=getattr(source, "timing", DEFAULT_TIMING), seed=seed, cache=cache)
    layouts = spaces.parse_layouts(spaces.DEFAULT_LAYOUTS if layouts is None else layouts)
    space_size = spaces.check_space_size(spaces.DEFAULT_SPACE_SIZE if space_size is None else space_size)
    check_precision(precision)
    if precision == "int8" and calibration_data is None:
        raise SearchError("precision int8 needs calibration inputs (--calibration-data FILE.npz): an int8 kernel is "
                          "quantised over the range its input takes on them")
    if calibration_method not in METHODS:
        raise SearchError(f"calibration method must be one of {', '.join(METHODS)}, got {calibration_method!r}")
    max_error = check_max_error(max_error)
    baselines = check_baselines(spaces.BASELINES if baselines is None else baselines)
    tally = _Tally(progress)
    graph, label, args = load_network(model, name, batch=batch, image_size=image_size, seed=seed,
                                      input_shape=input_shape)  # a bad model file is refused before a cache is made
    if not graph.tunable:
        raise SearchError(f"{label}: nothing to tune: no operator of a kind tessera plans ({', '.join(KINDS)})")
    calibration, int8_note = None, ""
    if calibration_data is not None:
        samples = load_calibration(calibration_data, graph)
        graph = calibrated(graph, input_ranges(graph, samples, settings.target, calibration_method))
        calibration = check_inputs(graph, settings.target, samples)
    elif precision == "auto" and int8_settings() and any(map(int8_capable, graph.tunable)):
        int8_note = "int8 not offered: no calibration inputs (--calibration-data FILE.npz)"
    space = spaces.tuning_space(graph, layouts=layouts, space_size=space_size,
                                baselines=baselines, precision=precision)
    meta = {"model": label, "args": args, "threads": settings.threads, "layouts": list(layouts),
            "space_size": space_size, "transforms": transforms, "precision": precision, "max_error": max_error,
            **({"calibration_data": {"file": str(calibration_data), "samples": len(calibration.inputs),
                                "method": calibration_method}} if calibration else {})}
    with source.open(settings.cache, settings.target, settings.threads, tally, **cluster) as provider:
        start = time.perf_counter()
        priced = source.price(provider, graph, space, tally.wrap(provider.measure), meta=meta,
                              shared=transforms == "shared")
        provenance, spent = source.provenance(provider), provider.spent()
    problem = replace(priced, meta={**priced.meta, "costs": provenance})
    return Extracted(graph, problem, label, args, settings, tuple(layouts), space_size, provenance, tally.tasks,
                     tally.new, tally.failed, time.perf_counter() - start, precision, max_error, baselines, spent,
                     calibration, int8_note)


class _Tally:
    """Counts what a provider's ``measure`` was asked (``tasks``), measured anew (``new``, from its progress events)
    and returned as failed (``failed``, cached failures included); forwards progress events."""

    def __init__(self, forward: Callable[[Any], None] | None) -> None:
        self.forward, self.tasks, self.new, self.failed, self._done = forward, 0, 0, 0, 0

    def __call__(self, event: Any) -> None:
        if event.done == 0:  # a new ``measure`` call (the hybrid source makes one per round)
            self._done = 0
        self.new += event.done - self._done
        self._done = event.done
        if self.forward is not None:
            self.forward(event)

    def wrap(self, measure: Callable[[list[Any]], list[Any]]) -> Callable[[list[Any]], list[Any]]:
        def counted(tasks: list[Any]) -> list[Any]:
            records = measure(tasks)
            self.tasks, self.failed = len(tasks), sum(not record.ok for record in records)
            return records

        return counted
