"""Experiment files: a TOML grid of problems x solvers x repeats, validated before anything runs.

An experiment file looks like::

    name = "solvers_synthetic"     # the MLflow experiment
    repeats = 2                    # runs of each (problem, solver) pair (default 1)
    time_limit = 10.0              # seconds, for every solver that does not set its own (default: the solver's)
    trial_timeout = 600.0          # wall-clock seconds a trial may run before it is cancelled (default: none)
    num_cpus = 2                   # CPUs of the embedded Ray node (default 2)
    lower_bound = true             # one LP-bound trial per problem instance (default true)
    metrics = ["solver"]           # "solver": cost, bound, gap, solve time; "latency": also export and time the plan
                                   # of every solver trial on a model instance

    [[problems]]                   # a synthetic generator; any list value is a grid axis
    generator = "chain"
    nodes = 200                    # chain and random only
    seed = [0, 1]
    candidates = [5, 8]            # default 8

    [[problems]]
    file = "problems/net.json"     # a problem JSON file, relative to the experiment file

    [[problems]]                   # a zoo model (or .onnx file) measured on this machine by experiments.tune.extract
    model = "resnet18"
    image_size = [32, 64]          # default: the model's own; batch (1) and seed (0) as well
    # input_shape = "1,3,48,320"   # instead of batch and image_size: as --input-shape, inputs separated by ";"
                                   # ("x=1,3,48,320; mask=1,1,48,320"); binds an ONNX file's dynamic dimensions
    space_size = 4                 # candidates per node (default: search.space.DEFAULT_SPACE_SIZE)
    layouts = ["NCHW,NCHW8c", "NCHW,NHWC,NCHW16c"]   # each string is one layout space
    threads = 1                    # runtime threads of the measurements (default 1)
    cache = "costs.sqlite"         # the cost cache (default ~/.cache/tessera/costs.sqlite)
    costs = ["measured", "hybrid"] # cost source(s): measured (default), xgboost or hybrid
    cost_model = "model.json"      # the cost-model file xgboost and hybrid need
    measure_fraction = [0.1, 0.2]  # hybrid: share of each node's candidates measured (default 0.2)
    timing = ["warm", "context"]   # measured, hybrid: timing method(s) (default warm; see cost_models.timer)
    transforms = ["shared", "pairwise"]  # layout transforms priced once per conversion (default) or per read

    [[solvers]]
    name = "ilp"                   # any other key is a solver parameter; a list value is a grid axis
    workers = 1

Every fault (unknown key, unknown generator or solver, bad type or value) raises ``ConfigError`` with one message
naming the file and the place. ``expand`` turns a config into the ``Trial`` list, each with a readable, stable id and a
hash of its own settings (used to resume). Trials on a model instance time the machine (``ProblemSpec.measured``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.compare import LP_BOUND
from solvers.base import SolverError, make_solver
from solvers.generators import GENERATORS
from solvers.problem import Problem, ProblemError

if TYPE_CHECKING:
    from experiments.tune import Extracted


METRICS = ("solver", "latency")
"""Metric groups an experiment can collect: ``solver`` always; ``latency`` (export the plan, check it and time it end
to end) on model instances."""

_TOP_KEYS = {"name", "description", "repeats", "time_limit", "trial_timeout", "num_cpus", "lower_bound", "metrics",
             "problems", "solvers"}
_GENERATOR_KEYS = {"generator", "seed", "candidates", "nodes"}
_MODEL_KEYS = {"model", "batch", "image_size", "input_shape", "seed", "space_size", "layouts", "threads", "cache",
               "costs", "cost_model", "measure_fraction", "timing", "transforms"}
_SOURCE_KEYS = {"cost_model": "model", "measure_fraction": "fraction", "timing": "timing"}
"""Model-problem keys (and ProblemSpec fields) -> the cost-source parameter each gives (``cost_models.sources``)."""
_KINDS = ("generator", "file", "model")
_NODES_GENERATORS = ("chain", "random")


class ExperimentError(ValueError):
    """Bad user input to the experiments layer (a malformed file, an unknown experiment)."""


class ConfigError(ExperimentError):
    """An experiment file is malformed; the message names the file and the faulty entry."""


@dataclass(frozen=True)
class ProblemSpec:
    """One problem instance: a generator with its arguments, a problem file (with the SHA-256 of its content), or a
    model whose candidate space is measured here (zoo name or .onnx path, input, space, threads, cost cache)."""

    generator: str | None = None
    seed: int | None = None
    candidates: int | None = None
    nodes: int | None = None
    file: str | None = None
    sha256: str | None = None
    model: str | None = None
    batch: int | None = None
    image_size: int | None = None
    input_shape: str | None = None  # as --input-shape, several inputs separated by ";"
    space_size: int | None = None
    layouts: str | None = None
    threads: int | None = None
    cache: str | None = None
    costs: str | None = None  # None: measured
    cost_model: str | None = None
    measure_fraction: float | None = None
    timing: str | None = None  # None: warm
    transforms: str | None = None  # None: shared

    @property
    def measured(self) -> bool:
        """Whether building the problem times kernels on this machine (so it must not overlap other timing)."""
        return self.model is not None

    @property
    def label(self) -> str:
        """Readable instance name: ``chain-n200-k8-s0``, the file's stem, ``resnet18-i32-b1-s0-n4-t1-NCHW+NHWC``
        (``det-1x3x64x64-s0-...`` with an input shape)."""
        if self.file is not None:
            return Path(self.file).stem
        if self.model is not None:
            size = "" if self.image_size is None else f"-i{self.image_size}"
            batch = "" if self.batch is None else f"-b{self.batch}"
            shape = "" if self.input_shape is None else "-" + "+".join(
                text.strip().replace(",", "x") for text in self.input_shape.split(";"))
            costs = "" if self.costs is None else f"-{self.costs}{self.measure_fraction or ''}"
            costs += "" if self.timing is None else f"-{self.timing}"
            costs += "" if self.transforms is None else f"-{self.transforms}"
            return (f"{Path(self.model).stem}{size}{batch}{shape}-s{self.seed}-n{self.space_size}-t{self.threads}-"
                    + self.layouts.replace(",", "+") + costs)
        nodes = "" if self.nodes is None else f"-n{self.nodes}"
        return f"{self.generator}{nodes}-k{self.candidates}-s{self.seed}"

    def settings(self) -> dict[str, Any]:
        """The fields that are set, for hashing and logging."""
        return {key: value for key, value in vars(self).items() if value is not None}

    def extract(self, progress: Callable[[Any], None] | None = None) -> Extracted:
        """Measure (what the cost cache lacks of) or price a model instance: ``experiments.tune.extract``."""
        from cost_models.sources import DEFAULT, cost_source
        from experiments.tune import extract

        params = {param: getattr(self, key) for key, param in _SOURCE_KEYS.items() if getattr(self, key) is not None}
        source = cost_source(self.costs or DEFAULT, **params)
        shape = None if self.input_shape is None else self.input_shape.split(";")
        return extract(self.model, batch=self.batch, image_size=self.image_size, input_shape=shape, seed=self.seed,
                       threads=self.threads, space_size=self.space_size, layouts=self.layouts, cache=self.cache,
                       costs=source, transforms=self.transforms or "shared", progress=progress)

    def load(self) -> Problem:
        """Generate, read or measure the problem."""
        if self.file is not None:
            return Problem.load(self.file)
        if self.model is not None:
            return self.extract().problem
        from solvers.generators import generate

        return generate(self.generator, seed=self.seed, nodes=self.nodes, candidates=self.candidates)


@dataclass(frozen=True)
class Trial:
    """One unit of work: a solver (with parameters) on a problem instance, or the instance's LP bound."""

    id: str
    config_hash: str
    """Hash of everything that decides the trial's outcome (problem, solver, parameters, repeat, metrics)."""
    problem: ProblemSpec
    solver: str
    params: Mapping[str, Any] = field(default_factory=dict)
    repeat: int = 0
    metrics: tuple[str, ...] = ("solver",)

    @property
    def timed_end_to_end(self) -> bool:
        """Whether the trial exports its plan and times it (``latency`` asked for, a solver trial on a model)."""
        return "latency" in self.metrics and self.problem.measured and self.solver != LP_BOUND

    def settings(self) -> dict[str, Any]:
        """Flat grid values of the trial, for MLflow params."""
        problem = {f"problem.{key}": value for key, value in self.problem.settings().items()}
        params = {f"solver.{key}": value for key, value in self.params.items()}
        return {"instance": self.problem.label, **problem, "solver": self.solver, **params, "repeat": self.repeat}


@dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment file (see the module docstring for the format)."""

    name: str
    problems: tuple[ProblemSpec, ...]
    solvers: tuple[tuple[str, Mapping[str, Any]], ...]
    repeats: int = 1
    num_cpus: int = 2
    lower_bound: bool = True
    metrics: tuple[str, ...] = ("solver",)
    trial_timeout: float | None = None
    """Wall-clock seconds a running trial may take before it is cancelled and recorded as an error."""
    description: str = ""
    source: str = ""
    """The file it was read from."""

    @property
    def config_hash(self) -> str:
        """Hash of the whole grid (the parent run's tag)."""
        return _hash([t.config_hash for t in expand(self)])


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment TOML file; every fault raises ``ConfigError``."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); is it an experiment file?") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    try:
        config = parse_config(raw, base=path.parent, source=str(path))
        expand(config)  # duplicate trial ids are a config fault too
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return config


def parse_config(raw: Mapping[str, Any], *, base: Path = Path("."), source: str = "") -> ExperimentConfig:
    """Validate a config dictionary (as read from TOML); relative problem files are resolved against ``base``."""
    _check_keys(raw, _TOP_KEYS, "the top level")
    for key in ("name", "problems", "solvers"):
        if key not in raw:
            raise ConfigError(f"missing required key {key!r}")
    name = raw["name"]
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"name must be a non-empty string, got {name!r}")
    metrics = tuple(_list_of(raw.get("metrics", ["solver"]), str, "metrics"))
    for metric in metrics:
        if metric not in METRICS:
            raise ConfigError(f"metrics: unknown metric group {metric!r}; available: {', '.join(METRICS)}")
    time_limit = raw.get("time_limit")
    if time_limit is not None and not _positive_number(time_limit):
        raise ConfigError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    trial_timeout = raw.get("trial_timeout")
    if trial_timeout is not None and not _positive_number(trial_timeout):
        raise ConfigError(f"trial_timeout must be a positive number of seconds, got {trial_timeout!r}")
    problems = tuple(p for i, spec in enumerate(_tables(raw, "problems")) for p in _problems(spec, i, base))
    if "latency" in metrics and not any(p.measured for p in problems):
        raise ConfigError("metrics: latency applies to model problems only, and there is none")
    return ExperimentConfig(
        name=name,
        problems=problems,
        solvers=tuple(s for i, spec in enumerate(_tables(raw, "solvers")) for s in _solvers(spec, i, time_limit)),
        repeats=_positive_int(raw.get("repeats", 1), "repeats"),
        num_cpus=_positive_int(raw.get("num_cpus", 2), "num_cpus"),
        lower_bound=_bool(raw.get("lower_bound", True), "lower_bound"),
        metrics=metrics,
        trial_timeout=None if trial_timeout is None else float(trial_timeout),
        description=str(raw.get("description", "")),
        source=source,
    )


def expand(config: ExperimentConfig) -> list[Trial]:
    """The trials of a config: per instance its LP-bound trial (if asked for), then each solver x repeat."""
    trials: list[Trial] = []
    for problem in config.problems:
        if config.lower_bound:
            trials.append(_trial(problem, LP_BOUND, {}, 0, config.metrics))
        for (solver, params), repeat in itertools.product(config.solvers, range(config.repeats)):
            trials.append(_trial(problem, solver, params, repeat, config.metrics))
    seen: set[str] = set()
    for trial in trials:
        if trial.id in seen:
            raise ConfigError(f"trial {trial.id!r} appears twice (a problem or solver entry is repeated)")
        seen.add(trial.id)
    return trials


def _trial(
    problem: ProblemSpec, solver: str, params: Mapping[str, Any], repeat: int, metrics: tuple[str, ...]
) -> Trial:
    settings = ",".join(f"{key}={value}" for key, value in params.items())
    label = f"{solver}({settings})" if settings else solver
    trial_id = f"{problem.label}/{label}/r{repeat}"
    digest = _hash({"problem": problem.settings(), "solver": solver, "params": dict(params), "repeat": repeat,
                    "metrics": list(metrics)})
    return Trial(trial_id, digest, problem, solver, dict(params), repeat, metrics)


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------- entries
def _tables(raw: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    tables = raw[key]
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{key} must be a non-empty array of tables ([[{key}]] entries)")
    return tables


def _problems(spec: Mapping[str, Any], index: int, base: Path) -> list[ProblemSpec]:
    where = f"problems[{index}]"
    if sum(kind in spec for kind in _KINDS) != 1:
        raise ConfigError(f"{where}: give exactly one of {', '.join(repr(k) for k in _KINDS)}")
    if "model" in spec:
        return _models(spec, where, base)
    if "file" in spec:
        _check_keys(spec, {"file"}, where)
        if not isinstance(spec["file"], str):
            raise ConfigError(f"{where}: file must be a path string, got {spec['file']!r}")
        path = (base / spec["file"]).resolve()
        try:
            Problem.load(path)
        except ProblemError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        return [ProblemSpec(file=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest())]
    _check_keys(spec, _GENERATOR_KEYS, where)
    generator = spec["generator"]
    if generator not in GENERATORS:
        raise ConfigError(f"{where}: unknown generator {generator!r}; choose from {', '.join(GENERATORS)}")
    if "seed" not in spec:
        raise ConfigError(f"{where}: missing required key 'seed'")
    if "nodes" in spec and generator not in _NODES_GENERATORS:
        raise ConfigError(f"{where}: nodes applies to {' and '.join(_NODES_GENERATORS)} only, not {generator}")
    seeds = _int_axis(spec["seed"], f"{where}.seed", minimum=0)
    candidates = _int_axis(spec.get("candidates", 8), f"{where}.candidates", minimum=1)
    nodes = _int_axis(spec["nodes"], f"{where}.nodes", minimum=1) if "nodes" in spec else [None]
    return [ProblemSpec(generator=generator, seed=s, candidates=k, nodes=n)
            for n, k, s in itertools.product(nodes, candidates, seeds)]


def _models(spec: Mapping[str, Any], where: str, base: Path) -> list[ProblemSpec]:
    from cost_models.cache import DEFAULT_CACHE
    from search.errors import SearchError
    from search.space import DEFAULT_LAYOUTS, DEFAULT_SPACE_SIZE, parse_layouts

    _check_keys(spec, _MODEL_KEYS, where)
    model = spec["model"]
    if not isinstance(model, str):
        raise ConfigError(f"{where}: model must be a zoo name or an .onnx path, got {model!r}")
    if model.endswith(".onnx"):
        model = str((base / model).resolve())
        if not Path(model).is_file():
            raise ConfigError(f"{where}: no such ONNX file {model}")
    else:
        from search.zoo import MODELS

        if model not in MODELS:
            raise ConfigError(f"{where}: unknown zoo model {model!r}; choose from {', '.join(MODELS)} or an .onnx file")
    cache = spec.get("cache", str(DEFAULT_CACHE))
    if not isinstance(cache, str):
        raise ConfigError(f"{where}: cache must be a path string, got {cache!r}")
    layouts = spec.get("layouts", [",".join(DEFAULT_LAYOUTS)])
    layouts = layouts if isinstance(layouts, list) else [layouts]
    if not layouts or not all(isinstance(text, str) for text in layouts):
        raise ConfigError(f"{where}.layouts must be a comma-separated string of layouts or a list of them")
    try:
        spaces = [",".join(parse_layouts(text)) for text in layouts]
    except SearchError as exc:
        raise ConfigError(f"{where}.layouts: {exc}") from exc
    axes = {
        **_shape_axes(spec, where),
        "seed": _int_axis(spec.get("seed", 0), f"{where}.seed", minimum=0),
        "space_size": _int_axis(spec.get("space_size", DEFAULT_SPACE_SIZE), f"{where}.space_size", minimum=1),
        "layouts": spaces,
        "threads": _int_axis(spec.get("threads", 1), f"{where}.threads", minimum=1),
        "transforms": _transforms_axis(spec.get("transforms"), f"{where}.transforms"),
    }
    cache = str((base / Path(cache).expanduser()).resolve())
    sources = _cost_sources(spec, where, base)
    return [ProblemSpec(model=model, cache=cache, **dict(zip(axes, values)), **source)
            for values in itertools.product(*axes.values()) for source in sources]


def _transforms_axis(value: Any, where: str) -> list[str | None]:
    """The ``transforms`` axis; absent: left unset (shared, the default), so labels and hashes stay as they were."""
    from experiments.tune import TRANSFORMS

    if value is None:
        return [None]
    values = value if isinstance(value, list) else [value]
    if not values or not all(v in TRANSFORMS for v in values) or len(set(values)) != len(values):
        raise ConfigError(f"{where} must be one or a list of distinct {', '.join(TRANSFORMS)}, got {value!r}")
    return values


def _shape_axes(spec: Mapping[str, Any], where: str) -> dict[str, list[Any]]:
    """The ``batch``, ``image_size`` and ``input_shape`` axes of a model problem (input_shape excludes the others)."""
    from search.errors import SearchError
    from search.zoo.shapes import input_shapes

    if "input_shape" not in spec:
        return {"batch": _int_axis(spec.get("batch", 1), f"{where}.batch", minimum=1),
                "image_size": [None] if "image_size" not in spec else _int_axis(spec["image_size"],
                                                                                f"{where}.image_size", minimum=1)}
    if "batch" in spec or "image_size" in spec:
        raise ConfigError(f"{where}: input_shape replaces batch and image_size; give one or the others")
    texts = spec["input_shape"] if isinstance(spec["input_shape"], list) else [spec["input_shape"]]
    if not texts or not all(isinstance(text, str) for text in texts):
        raise ConfigError(f"{where}.input_shape must be a string such as \"1,3,640,640\" or a list of them")
    try:
        shapes = ["; ".join(str(s) for s in input_shapes(text.split(";"))) for text in texts]
    except SearchError as exc:
        raise ConfigError(f"{where}.input_shape: {exc}") from exc
    return {"batch": [None], "image_size": [None], "input_shape": shapes}


def _cost_sources(spec: Mapping[str, Any], where: str, base: Path) -> list[dict[str, Any]]:
    """The ``costs`` axis with the parameters each source takes (its model file, the measured fractions), as
    ProblemSpec fields; every source is built once here, so that its own checks run before anything does."""
    from cost_models.sources import COST_SOURCES, DEFAULT, CostSourceError, cost_source

    costs = spec.get("costs", [DEFAULT])
    costs = costs if isinstance(costs, list) else [costs]
    if not costs or any(c not in COST_SOURCES for c in costs) or len(set(costs)) != len(costs):
        raise ConfigError(f"{where}.costs must be one or a list of distinct {', '.join(COST_SOURCES)}, got {costs!r}")
    fractions = spec.get("measure_fraction", [0.2])
    fractions = fractions if isinstance(fractions, list) else [fractions]
    if not fractions or not all(_positive_number(f) and f <= 1 for f in fractions):
        raise ConfigError(f"{where}.measure_fraction must be a number in (0, 1] or a list of them, got {fractions!r}")
    model = spec.get("cost_model")
    if any("model" in COST_SOURCES[c].parameters() for c in costs):
        if not isinstance(model, str):
            raise ConfigError(f"{where}: costs {costs} need cost_model, the path of a cost-model file")
        model = str((base / Path(model).expanduser()).resolve())
        if not Path(model).is_file():
            raise ConfigError(f"{where}: no such cost-model file {model}")
    timings = spec.get("timing", [None])  # absent: left unset, as before timing methods existed (labels, hashes)
    timings = timings if isinstance(timings, list) else [timings]
    if not timings or not all(t is None or isinstance(t, str) for t in timings) or len(set(timings)) != len(timings):
        raise ConfigError(f"{where}.timing must be a timing method or a list of distinct ones, got {timings!r}")
    if "timing" in spec and not any("timing" in COST_SOURCES[c].parameters() for c in costs):
        raise ConfigError(f"{where}: timing applies to the sources that measure, not to costs {costs}")
    axes = {"cost_model": [model], "measure_fraction": [float(f) for f in fractions], "timing": timings}
    out: list[dict[str, Any]] = []
    for source in costs:
        taken = {key: axes[key] for key, param in _SOURCE_KEYS.items() if param in COST_SOURCES[source].parameters()}
        for values in itertools.product(*taken.values()):
            fields = {key: value for key, value in zip(taken, values) if value is not None}
            try:
                cost_source(source, **{_SOURCE_KEYS[key]: value for key, value in fields.items()})
            except CostSourceError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            # the default source leaves the fields unset, as before sources were a registry: same labels and hashes
            out.append({} if source == DEFAULT and not fields else {"costs": source, **fields})
    return out


def _solvers(spec: Mapping[str, Any], index: int, time_limit: float | None) -> list[tuple[str, dict[str, Any]]]:
    where = f"solvers[{index}]"
    if "name" not in spec:
        raise ConfigError(f"{where}: missing required key 'name'")
    name = spec["name"]
    try:
        make_solver(name)  # an unknown name fails here, before its parameters are looked at
    except SolverError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    axes = {key: value if isinstance(value, list) else [value] for key, value in spec.items() if key != "name"}
    if time_limit is not None and "time_limit" not in axes:
        axes["time_limit"] = [time_limit]
    for key, values in axes.items():
        if not values:
            raise ConfigError(f"{where}.{key}: an empty list gives no trials")
    combos = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
    for params in combos:
        try:
            make_solver(name, **params)._check_params()
        except SolverError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
    return [(name, params) for params in combos]


# ---------------------------------------------------------------------------------------------------- values
def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(value: Any, where: str) -> int:
    if not _is_int(value) or value < 1:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and math.isfinite(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    return value


def _list_of(value: Any, kind: type, where: str) -> list[Any]:
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise ConfigError(f"{where} must be a list of {kind.__name__}, got {value!r}")
    return value


def _int_axis(value: Any, where: str, *, minimum: int) -> list[int]:
    """An integer or a non-empty list of distinct integers, each at least ``minimum``."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(_is_int(v) and v >= minimum for v in values) or len(set(values)) != len(values):
        raise ConfigError(f"{where} must be an integer >= {minimum} or a non-empty list of distinct ones, "
                          f"got {value!r}")
    return values
