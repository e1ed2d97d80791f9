"""Cost sources: where a problem's costs come from, one class per source, registered by name.

A source is a frozen dataclass whose fields are its parameters, checked when it is built. ``open`` builds the
``CostProvider`` that prices the tasks, and ``provenance`` says where the costs came from (a problem keeps it as
``meta["costs"]``). The command line's ``--costs`` and an experiment file's ``costs`` offer exactly the sources of
``COST_SOURCES``, so a new source is a subclass decorated with ``@register``; each parameter is declared once, with
``parameter`` (its flag, what it is, its help and the kind of value), and ``source_parameters`` gives the command line
its flags and an experiment file its keys. A source prices a space through its provider with ``price`` (every task at
once by default). This module imports neither TVM nor XGBoost; opening a source (or checking a hybrid one's
parameters) does.

Built in:

- ``measured``: build and time every task the cost cache lacks (``cost_models.measure.MeasuredCosts``, or on a Ray
  cluster ``cost_models.cluster_costs.ClusterCosts``) with a timing method (``timing``: ``context`` by default,
  ``warm`` or ``cold``; see ``cost_models.timer``);
- ``xgboost``: a regression cost-model file predicts every task (``cost_models.learned.PredictedCosts``);
- ``calibrated``: measure as ``measured``, then price each task by its in-network time where profiles of exported
  plans left one in the cache, else by its isolated time scaled by its kind's in-network ratio (read off the tasks
  a solver's plan ran, measured nearest in time; ``cost_models.calibration.CalibratedCosts``);
- ``hybrid``: measure the best-predicted ``fraction`` of each node's candidates over ``rounds`` predict-measure-refit
  rounds and predict the rest (``cost_models.learned.HybridCosts``), measuring with a timing method as ``measured``;
- ``selective``: measure the best-predicted candidates of each node (the ``initial`` best and those within ``margin``
  of the best), then every task of the plan solved on the costs known so far, until the plan's tasks are all
  measured; the model refit on what is known predicts the rest
  (``cost_models.selective``). ``tune``'s calibration rounds after it keep pricing this way (``calibrated``
  otherwise: ``CostSource.calibrated``).

``tune`` and ``extract`` take ``selective`` when no source is named, on a host whose vector unit tessera ships a
model for, and ``measured`` elsewhere (``default_source``); an experiment file's problems take ``measured``
(``DEFAULT``).

Examples
--------
>>> cost_source("xgboost", model="model.json")
XGBoostSource(model='model.json')
>>> cost_source("simulated")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
cost_models.errors.CostSourceError: unknown cost source 'simulated'; choose from measured, xgboost, hybrid, ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cost_models.cache import DEFAULT_TIMING, TIMING_METHODS, CostCache
from cost_models.errors import CostSourceError

if TYPE_CHECKING:
    import tvm

    from cost_models.cache import CostRecord
    from cost_models.cluster import Cluster
    from cost_models.cluster_costs import ClusterCosts
    from cost_models.measure import CostProvider, MeasuredCosts, Progress
    from cost_models.tasks import Task
    from cost_models.xgb_model import XGBCostModel
    from search.candidates import Candidate
    from search.graph import OpGraph
    from solvers.problem import Problem

DEFAULT = "measured"
"""The source of an experiment file's problems when none is named: every task measured, the same on every host (a
trial's label and hash mean one thing everywhere)."""


def default_source() -> str:
    """The source ``tessera tune`` and ``extract`` use when none is named: ``selective`` where tessera ships a cost
    model for this host's vector unit (``cost_models.shipped``), else ``measured``."""
    from cost_models.shipped import model_path

    return "selective" if model_path().is_file() else "measured"


VALUE_KINDS = ("path", "fraction", "share", "count", "choice")
"""What a parameter's value is: a file, a number in (0, 1], a number in [0, 1], an integer >= 1, or one of its
``choices``."""


@dataclass(frozen=True)
class Parameter:
    """How a source parameter is given: the command line's ``flag`` (an experiment file's key is the flag's name with
    underscores), ``about`` (what the value is, for errors), ``help`` (for the command line) and the ``kind`` of value
    (``VALUE_KINDS``), with its ``choices`` if it is one of them."""

    flag: str
    about: str
    help: str
    kind: str
    choices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The experiment file's key (and the command line's destination)."""
        return self.flag.removeprefix("--").replace("-", "_")


def parameter(flag: str, about: str, help: str, kind: str, default: Any = MISSING,
              choices: tuple[str, ...] = ()) -> Any:
    """A source field declaring the parameter ``Parameter(flag, about, help, kind, choices)``, required without a
    ``default``."""
    if kind not in VALUE_KINDS:
        raise ValueError(f"unknown kind of parameter value {kind!r}; choose from {', '.join(VALUE_KINDS)}")
    return field(default=default, metadata={"parameter": Parameter(flag, about, help, kind, choices)})


@dataclass(frozen=True)
class SourceParameter:
    """A parameter as the registry offers it: the sources' field ``name``, its ``default`` (``MISSING``: required),
    its declaration and the ``sources`` taking it."""

    name: str
    default: Any
    declared: Parameter
    sources: tuple[str, ...]

    @property
    def type(self) -> type:
        """The command line's type of a value."""
        return {"fraction": float, "share": float, "count": int}.get(self.declared.kind, str)

    @property
    def help(self) -> str:
        """The command line's help: the sources taking it, its help and its default."""
        default = "" if self.default is MISSING else f" (default: {self.default})"
        return f"{', '.join(self.sources)}: {self.declared.help}{default}"


def source_parameters() -> dict[str, SourceParameter]:
    """Every parameter of the registered sources by name, in the order they are first declared."""
    found: dict[str, SourceParameter] = {}
    for name, cls in COST_SOURCES.items():
        for f in fields(cls):
            known = found.get(f.name)
            sources = (*known.sources, name) if known else (name,)
            found[f.name] = SourceParameter(f.name, f.default, f.metadata["parameter"], sources)
    return found


@dataclass(frozen=True)
class CostSource(ABC):
    """Base of every cost source: its fields are its parameters, each with a ``Parameter`` in its metadata.

    Subclasses set ``name`` and ``description`` (and ``measures`` False if they time nothing), declare their
    parameters with ``parameter``, check them in ``__post_init__`` (raising ``CostSourceError``), implement ``open``
    and extend ``provenance``.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    """What the source does, a clause for the command line's help."""
    measures: ClassVar[bool] = True
    """Whether the source times tasks (and so can do it on a cluster)."""

    @classmethod
    def parameters(cls) -> dict[str, bool]:
        """Parameter name -> whether it is required."""
        return {f.name: f.default is MISSING and f.default_factory is MISSING for f in fields(cls)}

    @abstractmethod
    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        """The provider pricing tasks for ``target`` (a ``tvm.target.Target``) timed with ``threads`` runtime threads.

        ``cache`` is the sqlite cost cache (created if missing), ``progress`` receives measurement progress, and the
        sources that measure do it on ``cluster`` if one is given (``cost_models.cluster``). A cache or model file
        that cannot be used, or a cluster that cannot be joined (``ClusterError``), raises ``CostSourceError``.
        """

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        """Where the costs priced by ``provider`` (opened by this source) came from, for a problem's
        ``meta["costs"]``; subclasses add their own entries."""
        return {"source": self.name, "provider": type(provider).__name__}

    def price(self, provider: CostProvider, graph: OpGraph, space: Mapping[str, Sequence[Candidate]],
              measure: Callable[[list[Task]], Sequence[CostRecord]], **problem_args: Any) -> Problem:
        """The problem of ``space`` priced through ``measure`` (``provider.measure``, perhaps counted): every task
        asked at once (``cost_models.pricing.build_problem``, which takes ``problem_args``); a source that decides
        what to measure from the plans it finds overrides it."""
        from cost_models.pricing import build_problem

        return build_problem(graph, space, measure, **problem_args)

    def calibrated(self, timing: str) -> CostSource:
        """The source of ``tune``'s calibration rounds after this one: ``calibrated``, measuring with ``timing``."""
        return CalibratedSource(timing)


COST_SOURCES: dict[str, type[CostSource]] = {}
"""Source name -> class, in the order the command line lists them."""


def register(cls: type[CostSource]) -> type[CostSource]:
    """Class decorator adding a cost source to ``COST_SOURCES`` under ``cls.name``."""
    COST_SOURCES[cls.name] = cls
    return cls


def cost_source(source: str | CostSource, **params: Any) -> CostSource:
    """The registered source named ``source`` with ``params``, or a source passed through unchanged.

    Raises
    ------
    CostSourceError
        An unknown name, a parameter the source does not take or a required one missing, or a bad value.
    """
    if isinstance(source, CostSource):
        if params:
            raise CostSourceError("parameters can only be given with a cost source's name, not with a source")
        return source
    if source not in COST_SOURCES:
        raise CostSourceError(f"unknown cost source {source!r}; choose from {', '.join(COST_SOURCES)}")
    taken = COST_SOURCES[source].parameters()
    unknown = [param for param in params if param not in taken]
    missing = [param for param, required in taken.items() if required and param not in params]
    if unknown or missing:
        raise CostSourceError(_misfit((unknown + missing)[0]))
    return COST_SOURCES[source](**params)


def _misfit(param: str) -> str:
    """The error for a parameter given to a source that does not take it, or missing from one that needs it."""
    takers = [name for name, cls in COST_SOURCES.items() if param in cls.parameters()]
    if not takers:
        return f"no cost source takes a parameter {param!r}"
    declared = source_parameters()[param].declared
    about = f"{declared.about} ({declared.flag})"
    verb = "need" if all(COST_SOURCES[name].parameters()[param] for name in takers) else "take"
    subject = f"the {_and(takers)} cost sources {verb}" if len(takers) > 1 else f"the {takers[0]} cost source {verb}s"
    message = f"{subject} {about}"
    others = [name for name in COST_SOURCES if name not in takers]
    return message + (f", and {_and(others)} costs take none" if others else "")


def _and(names: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ---------------------------------------------------------------------------------------------------- sources
def _model_file() -> Any:
    """The ``model`` parameter: a cost-model file; None, the model shipped for this host's vector unit."""
    return parameter("--cost-model", "a cost-model file", "cost-model file from 'tessera costmodel train' (default: "
                     "the one tessera ships for this host's vector unit)", "path", default=None)


def _cache(path: str | Path) -> CostCache:
    """The cost cache at ``path``; an existing file is opened now, so that one that is no cost cache is refused here,
    a missing one is created at its first use (not by a run refused before it measures)."""
    from cost_models.cache import CacheError

    try:
        store = CostCache(path)
        if store.path.exists():
            len(store)
    except CacheError as exc:
        raise CostSourceError(str(exc)) from exc
    return store


def _model(path: str | Path | None) -> XGBCostModel:
    """The model in the file ``path``; None: the shipped one of this host's vector unit."""
    from cost_models.shipped import shipped_model
    from cost_models.xgb_model import ModelError, XGBCostModel

    try:
        return shipped_model() if path is None else XGBCostModel.load(path)
    except ModelError as exc:
        raise CostSourceError(str(exc)) from exc


def _model_name(path: str | Path | None) -> str:
    """How provenance names the model: its file, or the shipped model's."""
    from cost_models.shipped import model_path

    return str(model_path() if path is None else path)


def _timing() -> Any:
    """The ``timing`` parameter of the sources that measure: a method of ``cost_models.cache.TIMING_METHODS``."""
    return parameter("--timing", "a timing method",
                     "context (weights and output flushed from the caches before each call, the input kept, as after "
                     "its producer in a network), warm (repeats back to back) or cold (the last-level cache evicted "
                     "before each call); records of different methods never mix in the cache", "choice",
                     default=DEFAULT_TIMING, choices=TIMING_METHODS)


def _check_timing(timing: str) -> None:
    from cost_models.cache import TIMING_METHODS

    if timing not in TIMING_METHODS:
        raise CostSourceError(f"unknown timing method {timing!r}; choose from {', '.join(TIMING_METHODS)}")


def refuse_cluster(source: CostSource) -> None:
    """Raise ``CostSourceError`` if ``source`` measures nothing, and so cannot run on a cluster."""
    if not source.measures:
        raise CostSourceError(f"{source.name} costs measure nothing, so nothing runs on a cluster; a cluster's "
                              f"address applies to the {_and(n for n, cls in COST_SOURCES.items() if cls.measures)} "
                              "costs")


def _measured(provider: MeasuredCosts | ClusterCosts) -> dict[str, Any]:
    """The cache file and measurement context of a ``MeasuredCosts``, and a ``ClusterCosts``' cluster figures."""
    cluster = {"cluster": provider.stats} if hasattr(provider, "cluster") else {}
    return {"cache": str(provider.cache.path), "context": dict(vars(provider.context)), **cluster}


@register
@dataclass(frozen=True)
class MeasuredSource(CostSource):
    """Build and time every task the cost cache lacks; the cache keeps every result."""

    name = "measured"
    description = "measure every task"
    timing: str = _timing()

    def __post_init__(self) -> None:
        _check_timing(self.timing)

    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        if cluster is None:
            from cost_models.measure import MeasuredCosts

            return MeasuredCosts(_cache(cache), target=target, threads=threads, timing=self.timing, progress=progress)
        from cost_models.cluster_costs import ClusterCosts

        return ClusterCosts(_cache(cache), target=target, threads=threads, cluster=cluster, timing=self.timing,
                            progress=progress)

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        return {**super().provenance(provider), **_measured(provider)}


@register
@dataclass(frozen=True)
class XGBoostSource(CostSource):
    """The regression model in the file ``model`` (None: the shipped one) predicts every task; nothing is measured and
    no cache is read."""

    name = "xgboost"
    description = "predict every task with the cost model"
    measures = False
    model: str | Path | None = _model_file()

    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        from cost_models.learned import PredictedCosts

        if cluster is not None:
            refuse_cluster(self)
        return PredictedCosts(_model(self.model))

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        return {**super().provenance(provider), "model": _model_name(self.model), **provider.stats}


@register
@dataclass(frozen=True)
class HybridSource(CostSource):
    """Measure the best-predicted ``fraction`` of each node's candidates over ``rounds`` predict-measure-refit rounds
    (the model in the file ``model``, None: the shipped one, refit after each), predict the rest."""

    name = "hybrid"
    description = "measure the best-predicted --measure-fraction of each node's candidates and predict the rest"
    model: str | Path | None = _model_file()
    fraction: float = parameter("--measure-fraction", "a measured fraction",
                                "share of each node's candidates to measure", "fraction", default=0.2)
    rounds: int = parameter("--hybrid-rounds", "predict-measure-refit rounds", "predict-measure-refit rounds", "count",
                            default=2)
    timing: str = _timing()

    def __post_init__(self) -> None:
        from cost_models.learned import check_fraction, check_rounds
        from cost_models.xgb_model import ModelError

        _check_timing(self.timing)
        try:
            check_fraction(self.fraction), check_rounds(self.rounds)
        except ModelError as exc:
            raise CostSourceError(str(exc)) from exc

    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        from cost_models.learned import HybridCosts

        model = _model(self.model)
        measured = MeasuredSource(self.timing).open(cache, target, threads, progress, cluster)
        return HybridCosts(measured, model, fraction=self.fraction, rounds=self.rounds)

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        return {**super().provenance(provider), **_measured(provider.measured), "model": _model_name(self.model),
                **provider.stats}


@register
@dataclass(frozen=True)
class CalibratedSource(CostSource):
    """Measure every task the cache lacks, then price it by its in-network time where a profile recorded one, else
    by its isolated time scaled by its kind's in-network ratio near when it was measured
    (``cost_models.calibration``)."""

    name = "calibrated"
    description = "measure every task and calibrate on the in-network times of profiled plans"
    timing: str = _timing()

    def __post_init__(self) -> None:
        _check_timing(self.timing)

    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        from cost_models.calibration import CalibratedCosts

        return CalibratedCosts(MeasuredSource(self.timing).open(cache, target, threads, progress, cluster))

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        return {**super().provenance(provider), **_measured(provider.measured), "calibration": provider.stats}


@register
@dataclass(frozen=True)
class SelectiveSource(CostSource):
    """Measure only what can change the plan: the best-predicted candidates of each node, then every task of the plan
    solved on the costs known so far, until that plan's tasks are all measured; the model in the file ``model`` (None:
    the shipped one), refit on what is known, predicts the rest (``cost_models.selective``)."""

    name = "selective"
    description = "measure the best-predicted candidates and every task of the plan, predict the rest"
    model: str | Path | None = _model_file()
    initial: int = parameter("--initial-picks", "best-predicted candidates measured first",
                             "best-predicted candidates of each node measured before the first solve", "count",
                             default=2)
    margin: float = parameter("--pick-margin", "a pick margin",
                              "a node's candidates predicted within this share of its best are measured before the "
                              "first solve too", "share", default=0.2)
    timing: str = _timing()

    def __post_init__(self) -> None:
        _check_timing(self.timing)
        if isinstance(self.initial, bool) or not isinstance(self.initial, int) or self.initial < 1:
            raise CostSourceError(f"the initial picks must be a positive integer, got {self.initial!r}")
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float)) or not 0 <= self.margin <= 1:
            raise CostSourceError(f"the pick margin must be in [0, 1], got {self.margin!r}")

    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        from cost_models.selective import SelectiveCosts

        model = _model(self.model)
        return SelectiveCosts(MeasuredSource(self.timing).open(cache, target, threads, progress, cluster), model)

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        return {**super().provenance(provider), **_measured(provider.measured), "model": _model_name(self.model),
                "initial_picks": self.initial, "pick_margin": self.margin, **provider.stats}

    def price(self, provider: CostProvider, graph: OpGraph, space: Mapping[str, Sequence[Candidate]],
              measure: Callable[[list[Task]], Sequence[CostRecord]], **problem_args: Any) -> Problem:
        from cost_models.selective import price_selectively

        return price_selectively(provider, graph, space, measure, initial=self.initial, margin=self.margin,
                                 **problem_args)

    def calibrated(self, timing: str) -> CostSource:
        return CalibratedSelectiveSource(model=self.model, timing=timing)


@dataclass(frozen=True)
class CalibratedSelectiveSource(CostSource):
    """``calibrated`` pricing over ``selective`` costs, for ``tune``'s calibration rounds after a selective first
    round: in-network times where profiles left them, else the known or predicted isolated time scaled by its kind's
    factor, the plan's tasks measured as ``selective`` measures them. Not offered by name."""

    name = "calibrated-selective"
    description = "calibrated pricing over selective measurement"
    model: str | Path | None = _model_file()
    timing: str = _timing()

    def open(self, cache: str | Path, target: tvm.target.Target, threads: int,
             progress: Callable[[Progress], None] | None, cluster: Cluster | None = None) -> CostProvider:
        from cost_models.calibration import CalibratedCosts

        selective = SelectiveSource(model=self.model, timing=self.timing).open(cache, target, threads, progress,
                                                                               cluster)
        return CalibratedCosts(selective.measured, isolated=selective)

    def provenance(self, provider: CostProvider) -> dict[str, Any]:
        return {**provider.isolated.stats, **super().provenance(provider), **_measured(provider.measured),
                "model": _model_name(self.model), "calibration": provider.stats}

    def price(self, provider: CostProvider, graph: OpGraph, space: Mapping[str, Sequence[Candidate]],
              measure: Callable[[list[Task]], Sequence[CostRecord]], **problem_args: Any) -> Problem:
        from cost_models.selective import price_selectively

        return price_selectively(provider.isolated, graph, space, measure, picks=False, **problem_args)
