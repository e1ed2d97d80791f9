"""Experiment files: a TOML grid of problems x solvers x repeats, validated before anything runs.

An experiment file looks like::

    name = "solvers_synthetic"     # the MLflow experiment
    description = "all solvers"    # free text (default "")
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

    [[problems]]                   # a zoo model (or .onnx file) measured here by experiments.extraction.extract
    model = "resnet18"
    image_size = [32, 64]          # default: the model's own
    batch = [1, 8]                 # default 1; seed as well (default 0)
    # input_shape = "1,3,48,320"   # instead of batch and image_size: as --input-shape, inputs separated by ";"
                                   # ("x=1,3,48,320; mask=1,1,48,320"); binds an ONNX file's dynamic dimensions
    space_size = 4                 # candidates per node (default: search.space.DEFAULT_SPACE_SIZE)
    layouts = ["NCHW,NCHW8c", "NCHW,NHWC,NCHW16c"]   # each string is one layout space
    threads = 1                    # runtime threads of the measurements (default 1)
    cache = "costs.sqlite"         # the cost cache (default ~/.cache/tessera/costs.sqlite, or under $XDG_CACHE_HOME)
    costs = ["measured", "hybrid"] # cost source(s): measured (default), xgboost, hybrid, calibrated, selective
                                   # (COST_SOURCES)
    cost_model = "model.json"      # xgboost, hybrid, selective: a cost-model file (default: the shipped one)
    measure_fraction = [0.1, 0.2]  # hybrid: share of each node's candidates measured (default 0.2)
    hybrid_rounds = 3              # hybrid: predict-measure-refit rounds (default 2); every --flag of a cost source's
                                   # parameter is a key (cost_models.sources.source_parameters)
    # initial_picks = 1            # selective: best-predicted candidates of each node measured first (default 2)
    # pick_margin = [0.0, 0.2]     # selective: and those predicted within this share of the best (default 0.2)
    timing = ["warm", "context"]   # the sources that measure: timing method(s) (default context; cost_models.timer)
    transforms = ["shared", "pairwise"]  # layout transforms priced once per conversion (default) or per read
    precision = ["fp32", "auto"]   # what kernels compute in: fp32 (default), bf16, int8 or auto (search.precision)
    max_error = 0.02               # with bf16 or int8: a plan's largest relative output error (experiments.budget)
    calibration_data = "inputs.npz"  # the model's inputs: int8 ranges and the error checked on them (as tune's)
    # address = "10.0.0.1:6379"    # measure on this Ray cluster (as tessera extract --address); not part of the
                                   # trial's id or hash; with tessera ablate --address on the same cluster, or --serial

    [[solvers]]
    name = "ilp"                   # any other key is a solver parameter; a list value is a grid axis
    workers = 1

Every fault (unknown key, unknown generator or solver, bad type or value) raises ``ConfigError`` with one message
naming the file and the place, and so does a grid of more than 100000 trials (``config_values.MAX_TRIALS``), before
it is expanded (the schema is ``experiments.config_schema``). ``expand`` turns a config into the ``Trial`` list, each
with a readable, stable id and a hash of its own settings (used to resume). Trials on a model instance time the machine
(``ProblemSpec.measured``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.compare import LP_BOUND
from solvers.input_files import InputFileError, read_text
from solvers.problem import Problem

if TYPE_CHECKING:
    from experiments.config_problems import ProblemEntry
    from experiments.extraction import Extracted


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
    hybrid_rounds: int | None = None  # None: 2
    initial_picks: int | None = None  # None: 2
    pick_margin: float | None = None  # None: 0.2
    timing: str | None = None  # None: context
    transforms: str | None = None  # None: shared
    precision: str | None = None  # None: fp32
    max_error: float | None = None  # None: search.precision.DEFAULT_MAX_ERROR with bf16 or int8
    calibration_data: str | None = None  # None: no int8, errors checked on a random input
    address: str | None = None  # a Ray cluster measuring it; where, not what: outside the trial's id and hash

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
            costs += "" if self.hybrid_rounds is None else f"-r{self.hybrid_rounds}"
            costs += "" if self.initial_picks is None else f"-p{self.initial_picks}"
            costs += "" if self.pick_margin is None else f"-m{self.pick_margin:g}"
            costs += "" if self.timing is None else f"-{self.timing}"
            costs += "" if self.transforms is None else f"-{self.transforms}"
            costs += "" if self.precision is None else f"-{self.precision}"
            costs += "" if self.max_error is None else f"-e{self.max_error:g}"
            costs += "" if self.calibration_data is None else f"-c{Path(self.calibration_data).stem}"
            return (f"{Path(self.model).stem}{size}{batch}{shape}-s{self.seed}-n{self.space_size}-t{self.threads}-"
                    + self.layouts.replace(",", "+") + costs)
        nodes = "" if self.nodes is None else f"-n{self.nodes}"
        return f"{self.generator}{nodes}-k{self.candidates}-s{self.seed}"

    def settings(self) -> dict[str, Any]:
        """The fields that are set, for logging (``identity`` for hashing)."""
        return {key: value for key, value in vars(self).items() if value is not None}

    def identity(self) -> dict[str, Any]:
        """The set fields that decide the problem, hashed into its trials' ``config_hash`` (all but ``address``)."""
        return {key: value for key, value in self.settings().items() if key != "address"}

    def extract(self, progress: Callable[[Any], None] | None = None) -> Extracted:
        """Measure (what the cost cache lacks of) or price a model instance: ``experiments.extraction.extract``."""
        from experiments.config_problems import cost_source_of
        from experiments.extraction import extract

        source = cost_source_of(self.settings())
        shape = None if self.input_shape is None else self.input_shape.split(";")
        return extract(self.model, batch=self.batch, image_size=self.image_size, input_shape=shape, seed=self.seed,
                       threads=self.threads, space_size=self.space_size, layouts=self.layouts, cache=self.cache,
                       costs=source, transforms=self.transforms or "shared", progress=progress, address=self.address,
                       precision=self.precision or "fp32", max_error=self.max_error,
                       calibration_data=self.calibration_data)

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
        raw = tomllib.loads(read_text(path))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except InputFileError as exc:
        raise ConfigError(str(exc)) from exc
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
    from pydantic import ValidationError

    from experiments.config_schema import ExperimentFile, describe

    try:
        checked = ExperimentFile.model_validate(raw, context={"base": Path(base)})
    except ValidationError as exc:
        raise ConfigError(describe(exc)) from exc
    return ExperimentConfig(
        name=checked.name,
        problems=tuple(spec for table in checked.problems for spec in _instances(table)),
        solvers=tuple((table.name, params) for table in checked.solvers
                      for params in table.settings(checked.time_limit)),
        repeats=checked.repeats,
        num_cpus=checked.num_cpus,
        lower_bound=checked.lower_bound,
        metrics=tuple(checked.metrics),
        trial_timeout=None if checked.trial_timeout is None else float(checked.trial_timeout),
        description=checked.description,
        source=source,
    )


def _instances(table: ProblemEntry) -> list[ProblemSpec]:
    """The product of a problem table's axes; a value of the ``source`` axis is a dict of fields of its own."""
    axes = table.axes()
    specs = []
    for values in itertools.product(*axes.values()):
        fields = dict(zip(axes, values))
        source = fields.pop("source", {})
        specs.append(ProblemSpec(**fields, **source))
    return specs


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
    digest = _hash({"problem": problem.identity(), "solver": solver, "params": dict(params), "repeat": repeat,
                    "metrics": list(metrics)})
    return Trial(trial_id, digest, problem, solver, dict(params), repeat, metrics)


def content_hash(data: Any) -> str:
    """SHA-256 of ``data`` as canonical JSON (sorted keys); trials are hashed by its first 16 characters."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _hash(data: Any) -> str:
    return content_hash(data)[:16]
