"""The problem tables of an experiment file (``[[problems]]``; the format is in ``experiments.config``).

A table is a generator's, a problem file's or a network's (``model``), told apart by the key that names it
(``AnyProblem``). Its instances are the product of its axes (``ProblemEntry.axes``), counted before they are built.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Strict,
    Tag,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from cost_models.cache import DEFAULT_CACHE
from cost_models.errors import CostSourceError
from cost_models.sources import (
    COST_SOURCES,
    DEFAULT,
    CostSource,
    SourceParameter,
    cost_source,
    source_parameters,
)
from experiments.config_values import (
    FractionAxis,
    PathText,
    PositiveNumber,
    SeedAxis,
    ShareAxis,
    SizeAxis,
    at_most,
    expect,
    member,
    resolved,
    text_axis,
)
from experiments.extraction import TRANSFORMS
from search.precision import PRECISIONS
from solvers.generator_sizes import check_sizes
from solvers.generators import GENERATORS
from solvers.problem import Problem, ProblemError

SOURCE_KEYS = {param.declared.key: name for name, param in source_parameters().items()}
"""Model-problem keys (and ``ProblemSpec`` fields) -> the cost-source parameter each gives (``cost_models.sources``)."""
SET_DEFAULTS = ("measure_fraction",)
"""Source keys whose default an instance sets when the file gives none, so that its label and hash name it."""

_NODES_GENERATORS = ("chain", "random")


def cost_source_of(fields: Mapping[str, Any]) -> CostSource:
    """The cost source that a problem instance's fields set (``costs``, default measured, and its parameters)."""
    params = {param: fields[key] for key, param in SOURCE_KEYS.items() if fields.get(key) is not None}
    return cost_source(fields.get("costs") or DEFAULT, **params)


class ProblemEntry(BaseModel):
    """A problem table: its instances are the product of its axes."""

    model_config = ConfigDict(extra="forbid")

    @abstractmethod
    def axes(self) -> dict[str, list[Any]]:
        """``ProblemSpec`` field -> the values it takes; the instances are their product, in this order."""

    @property
    def count(self) -> int:
        """How many instances the table gives."""
        return math.prod(len(values) for values in self.axes().values())


class GeneratorProblem(ProblemEntry):
    """``generator``, ``seed``, ``candidates``, ``nodes``: a synthetic problem of ``solvers.generators``."""

    generator: Annotated[str, Strict(), expect("a generator name")]
    seed: SeedAxis
    candidates: SizeAxis = [8]
    nodes: SizeAxis | None = None

    @model_validator(mode="after")
    def _generator_takes_the_sizes(self) -> GeneratorProblem:
        if self.generator not in GENERATORS:
            raise ValueError(f"unknown generator {self.generator!r}; choose from {', '.join(GENERATORS)}")
        if self.nodes is not None and self.generator not in _NODES_GENERATORS:
            raise ValueError(f"nodes applies to {' and '.join(_NODES_GENERATORS)} only, not {self.generator}")
        at_most(self.count, f"its axes give {self.count} instances")
        for nodes, candidates, seed in itertools.product(self.nodes or [None], self.candidates, self.seed):
            sizes = {"candidates": candidates} if nodes is None else {"nodes": nodes, "candidates": candidates}
            try:
                check_sizes(seed=seed, **sizes)  # the generators' own checks, before anything is generated
            except ProblemError as exc:
                raise ValueError(str(exc)) from exc
        return self

    def axes(self) -> dict[str, list[Any]]:
        return {"generator": [self.generator], "nodes": self.nodes or [None], "candidates": self.candidates,
                "seed": self.seed}


class FileProblem(ProblemEntry):
    """``file``: a problem JSON file, hashed by content."""

    file: PathText
    _sha256: str = PrivateAttr("")

    @model_validator(mode="after")
    def _loads(self) -> FileProblem:
        try:
            Problem.load(self.file)
        except ProblemError as exc:
            raise ValueError(str(exc)) from exc
        self._sha256 = hashlib.sha256(Path(self.file).read_bytes()).hexdigest()
        return self

    def axes(self) -> dict[str, list[Any]]:
        return {"file": [self.file], "sha256": [self._sha256]}


def _default_layouts() -> list[str]:
    from search.space import DEFAULT_LAYOUTS

    return [",".join(DEFAULT_LAYOUTS)]


def _default_space_size() -> list[int]:
    from search.space import DEFAULT_SPACE_SIZE

    return [DEFAULT_SPACE_SIZE]


InputShapes = text_axis('a string such as "1,3,640,640" or a list of them', distinct=False)
LayoutSpaces = text_axis("a comma-separated string of layouts or a list of them", distinct=False)
CostSources = Annotated[text_axis("a cost source or a list of distinct ones"), member(COST_SOURCES, "cost source")]
TransformPricings = Annotated[text_axis("shared or pairwise, or a list of distinct ones"),
                              member(TRANSFORMS, "layout-transform pricing")]
Precisions = Annotated[text_axis("fp32, bf16, int8 or auto, or a list of distinct ones"),
                       member(PRECISIONS, "precision")]


class _ModelTable(ProblemEntry):
    """``model`` and the keys of a network measured or priced here (see ``experiments.config``), but the cost sources'
    parameters, which ``ModelProblem`` adds from the registry."""

    model: Annotated[str, Strict(), expect("a zoo name or an .onnx path")]
    batch: SizeAxis | None = None
    image_size: SizeAxis | None = None
    input_shape: InputShapes | None = None
    seed: SeedAxis = [0]
    space_size: SizeAxis = Field(default_factory=_default_space_size)
    layouts: LayoutSpaces = Field(default_factory=_default_layouts, validate_default=True)
    threads: SizeAxis = [1]
    cache: PathText = Field(default=str(DEFAULT_CACHE), validate_default=True)
    costs: CostSources = [DEFAULT]
    transforms: TransformPricings | None = None
    precision: Precisions | None = None
    max_error: PositiveNumber | None = None
    calibration_data: PathText | None = None
    address: Annotated[str, Strict(), expect("a Ray cluster's HOST:PORT")] | None = None

    @field_validator("model")
    @classmethod
    def _onnx_file_resolved(cls, model: str, info: ValidationInfo) -> str:
        return resolved(model, info) if model.endswith(".onnx") else model

    @field_validator("layouts")
    @classmethod
    def _layout_spaces(cls, texts: list[str]) -> list[str]:
        from search.errors import SearchError
        from search.space import parse_layouts

        try:
            return [",".join(parse_layouts(text)) for text in texts]
        except SearchError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("address")
    @classmethod
    def _cluster_address(cls, address: str) -> str:
        from cost_models.cluster import Cluster

        try:
            Cluster(address)
        except CostSourceError as exc:
            raise ValueError(str(exc)) from exc
        return address

    @field_validator("input_shape")
    @classmethod
    def _input_shapes(cls, texts: list[str]) -> list[str]:
        from search.errors import SearchError
        from search.zoo.shapes import input_shapes

        try:
            return ["; ".join(str(shape) for shape in input_shapes(text.split(";"))) for text in texts]
        except SearchError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _network_and_sources_exist(self) -> _ModelTable:
        if self.model.endswith(".onnx"):
            if not Path(self.model).is_file():
                raise ValueError(f"no such ONNX file {self.model}")
        else:
            from search.zoo import MODELS

            if self.model not in MODELS:
                raise ValueError(f"unknown zoo model {self.model!r}; choose from {', '.join(MODELS)} or an .onnx file")
        if self.input_shape is not None and (self.batch is not None or self.image_size is not None):
            raise ValueError("input_shape replaces batch and image_size; give one or the others")
        at_most(self.count, f"its axes give {self.count} instances")
        self._check_sources()
        return self

    def _check_sources(self) -> None:
        """The cost-model file the sources need, the timing they take, and each source built once."""
        takes = {param for source in self.costs for param in COST_SOURCES[source].parameters()}
        if "model" in takes:
            if self.cost_model is None:
                raise ValueError(f"costs {self.costs} need cost_model, the path of a cost-model file")
            if not Path(self.cost_model).is_file():
                raise ValueError(f"no such cost-model file {self.cost_model}")
        if self.timing is not None and "timing" not in takes:
            raise ValueError(f"timing applies to the sources that measure, not to costs {self.costs}")
        if self.address is not None and not all(COST_SOURCES[source].measures for source in self.costs):
            raise ValueError(f"address applies to the sources that measure, and costs {self.costs} has one that "
                             "does not; give it a problem table of its own")
        for fields in self._sources():
            try:
                cost_source_of(fields)
            except CostSourceError as exc:
                raise ValueError(str(exc)) from exc

    def _source_axes(self) -> dict[str, dict[str, list[Any]]]:
        """Per cost source, the axes of the parameters it takes (``ProblemSpec`` field -> values)."""
        axes = {key: _axis_values(getattr(self, key), param) for key, param in SOURCE_KEYS.items()}
        return {source: {key: axes[key] for key, param in SOURCE_KEYS.items()
                         if param in COST_SOURCES[source].parameters()} for source in self.costs}

    def _sources(self) -> list[dict[str, Any]]:
        """The cost-source axis: per source and combination of its parameters, the ``ProblemSpec`` fields it sets
        (none for the default source without parameters, as before sources were a registry: same labels and hashes)."""
        out: list[dict[str, Any]] = []
        for source, taken in self._source_axes().items():
            for values in itertools.product(*taken.values()):
                fields = {key: value for key, value in zip(taken, values) if value is not None}
                out.append({} if source == DEFAULT and not fields else {"costs": source, **fields})
        return out

    def _grid(self) -> dict[str, list[Any]]:
        """The axes besides the cost sources; an input shape stands for batch and image size."""
        shape = ({"batch": self.batch or [1], "image_size": self.image_size or [None]} if self.input_shape is None
                 else {"batch": [None], "image_size": [None], "input_shape": self.input_shape})
        return {"model": [self.model], "cache": [self.cache], **shape, "seed": self.seed,
                "space_size": self.space_size, "layouts": self.layouts, "threads": self.threads,
                "transforms": self.transforms or [None], "precision": self.precision or [None],
                "max_error": [self.max_error], "calibration_data": [self.calibration_data],
                "address": [self.address]}

    def axes(self) -> dict[str, list[Any]]:
        """As for every problem table; the ``source`` axis holds dicts of fields (merged into the instance)."""
        return {**self._grid(), "source": self._sources()}

    @property
    def count(self) -> int:
        sources = sum(math.prod(len(values) for values in taken.values()) for taken in self._source_axes().values())
        return math.prod(len(values) for values in self._grid().values()) * sources


def _axis_values(value: Any, param: str) -> list[Any]:
    """The value of the key giving the source parameter ``param`` as an axis: a file as one value, fractions as
    floats, none given as ``[None]``."""
    if not isinstance(value, list):
        return [value]
    return [float(v) for v in value] if source_parameters()[param].declared.kind in ("fraction", "share") else value


_KEY_TYPES = {"path": PathText, "fraction": FractionAxis, "share": ShareAxis, "count": SizeAxis}
"""A source parameter's kind of value -> its key's type (one of its ``choices``: a text axis)."""


def _source_key(param: SourceParameter) -> tuple[Any, Any]:
    """The type and default of the key giving ``param``."""
    declared = param.declared
    value = _KEY_TYPES.get(declared.kind) or text_axis(f"{declared.about} or a list of distinct ones")
    return (value, [param.default]) if declared.key in SET_DEFAULTS else (value | None, None)


ModelProblem = create_model("ModelProblem", __base__=_ModelTable, __module__=__name__,
                            **{param.declared.key: _source_key(param) for param in source_parameters().values()})
ModelProblem.__doc__ = """``model``, the keys of a network measured or priced here and one key per cost-source
parameter (its flag's name: ``cost_model``, ``measure_fraction``, ``hybrid_rounds``, ``timing``)."""


PROBLEM_TABLES: dict[str, type[ProblemEntry]] = {"generator": GeneratorProblem, "file": FileProblem,
                                                   "model": ModelProblem}
"""The problem kind (the key that names it, pydantic's tag) -> its table."""


def _problem_kind(table: Any) -> str | None:
    kinds = [kind for kind in PROBLEM_TABLES if kind in table]
    return kinds[0] if len(kinds) == 1 else None


AnyProblem = Annotated[
    Annotated[GeneratorProblem, Tag("generator")] | Annotated[FileProblem, Tag("file")]
    | Annotated[ModelProblem, Tag("model")],
    Discriminator(_problem_kind, custom_error_type="problem_kind",
                  custom_error_message=f"give exactly one of {', '.join(map(repr, PROBLEM_TABLES))}"),
]
"""A problem table of the kind its naming key says."""


