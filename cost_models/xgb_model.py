"""The learned cost model: gradient-boosted trees (``xgboost``) over ``cost_models.features``, fit/predict style.

``XGBCostModel(objective="regression")`` predicts log time per unit of work (``predict`` returns milliseconds) and
can price tasks in place of a measurement; ``objective="rank"`` learns a pairwise ranking within each group of
candidates (``features.group_key``) and only orders them: it serves for selection and evaluation, not as a cost
source.
A model file is one JSON document: the booster, the feature version, the vector unit the features were computed for
(lane and register use differ between AVX-512 and AVX2 hosts), the parameters, where the training data came from,
and the training data itself (task keys and log times), so a model can be refit with new measurements; a name ending
in ``.gz`` is gzip-compressed (the shipped models are: ``cost_models.shipped``).
Training is deterministic for a seed (exact tree method, no sampling).
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from cost_models.errors import ModelError
from cost_models.features import FEATURE_NAMES, FEATURE_VERSION, INDEX, feature_matrix, group_key
from search.isa import HOST
from solvers.input_files import InputFileError, checked_input, read_limited, read_text

FORMAT = "tessera-cost-model"
OBJECTIVES = {"regression": "reg:squarederror", "rank": "rank:pairwise"}


def log_work(features: np.ndarray) -> np.ndarray:
    """Natural log of each task's work: FLOPs for a kernel, bytes moved for a task without FLOPs (a transform, a
    chain). The regression learns log time per unit of work, which trees can carry to sizes they were not trained on,
    where log time itself would stay inside the training range."""
    log2 = np.where(features[:, INDEX["log_flops"]] == 0, features[:, INDEX["log_bytes"]],
                    features[:, INDEX["log_flops"]])
    return log2 * np.log(2.0)


@dataclass
class XGBCostModel:
    """Gradient-boosted trees predicting a task's time from its features.

    Parameters
    ----------
    objective : {"regression", "rank"}
        Squared error on log milliseconds, or XGBoost's pairwise ranking within each candidate group.
    n_estimators, max_depth, learning_rate, min_child_weight
        The boosting parameters.
    seed : int
        Recorded and passed to XGBoost; with the exact tree method and no row or column sampling the fit is
        deterministic anyway.
    """

    objective: str = "regression"
    n_estimators: int = 300
    max_depth: int = 8
    learning_rate: float = 0.1
    min_child_weight: float = 1.0
    seed: int = 0
    provenance: dict[str, Any] = field(default_factory=dict)
    training_keys: list[str] = field(default_factory=list, repr=False)
    training_log_ms: list[float] = field(default_factory=list, repr=False)
    booster: xgb.Booster | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ModelError(f"unknown objective {self.objective!r}; choose from {', '.join(OBJECTIVES)}")
        if not (isinstance(self.n_estimators, int) and self.n_estimators >= 1 and self.max_depth >= 1
                and self.learning_rate > 0 and self.min_child_weight >= 0):
            raise ModelError("n_estimators and max_depth must be >= 1, learning_rate > 0, min_child_weight >= 0")

    @property
    def predicts_times(self) -> bool:
        """Whether ``predict`` returns milliseconds (regression) rather than an order (ranking)."""
        return self.objective == "regression"

    def params(self) -> dict[str, Any]:
        return {"objective": self.objective, "n_estimators": self.n_estimators, "max_depth": self.max_depth,
                "learning_rate": self.learning_rate, "min_child_weight": self.min_child_weight, "seed": self.seed}

    # ------------------------------------------------------------------------------------------------ fit / predict
    def fit(self, keys: Sequence[str], times_ms: Sequence[float], provenance: Mapping[str, Any] | None = None,
            ) -> XGBCostModel:
        """Train on task keys and their measured median times (ms); replaces any earlier fit."""
        times = np.asarray(times_ms, dtype=np.float64)
        if len(keys) != len(times):
            raise ModelError(f"{len(keys)} keys but {len(times)} times")
        if not len(keys):
            raise ModelError("no training data: the cache holds no successful measurement for these tasks")
        if not np.all(np.isfinite(times)) or np.any(times <= 0):
            raise ModelError("training times must be finite and positive (failed measurements are left out)")
        keys = [str(key) for key in keys]
        order = np.argsort([group_key(key) for key in keys], kind="stable")  # ranking needs groups contiguous
        keys, log_ms = [keys[i] for i in order], np.log(times[order])
        features = feature_matrix(keys)
        data = xgb.DMatrix(features, feature_names=list(FEATURE_NAMES))
        if self.objective == "rank":
            groups = [group_key(key) for key in keys]
            data.set_label(log_ms.max() - log_ms)  # relevance: faster is more relevant
            data.set_group([len(list(run)) for _, run in itertools.groupby(groups)])
        else:
            data.set_label(log_ms - log_work(features))
        self.booster = xgb.train(self._train_params(), data, num_boost_round=self.n_estimators)
        self.training_keys, self.training_log_ms = keys, [float(v) for v in log_ms]
        self.provenance = {**dict(provenance or {}), "records": len(keys),
                           "groups": len(set(map(group_key, keys)))}
        return self

    def _train_params(self) -> dict[str, Any]:
        return {"objective": OBJECTIVES[self.objective], "max_depth": self.max_depth, "eta": self.learning_rate,
                "min_child_weight": self.min_child_weight, "tree_method": "exact", "seed": self.seed,
                "nthread": len(os.sched_getaffinity(0)), "verbosity": 0}

    def boosted(self, keys: Sequence[str], times_ms: Sequence[float], rounds: int) -> XGBCostModel:
        """A new regression model: this one's trees and ``rounds`` more boosted on ``keys`` and their times (what
        this model mispredicts of them), its training data this one's plus ``keys``. A fraction of a second where
        ``refit`` retrains on all the data (seconds on a shipped model's): how selective measurement folds in what it
        measured."""
        if not self.predicts_times or self.booster is None:
            raise ModelError("only a trained regression model can be boosted on new times")
        times = np.asarray(times_ms, dtype=np.float64)
        if not len(keys) or len(keys) != len(times) or not np.all(np.isfinite(times)) or np.any(times <= 0):
            raise ModelError("boosting needs keys with finite, positive times, as many as keys")
        features = feature_matrix(list(keys))
        data = xgb.DMatrix(features, feature_names=list(FEATURE_NAMES))
        data.set_label(np.log(times) - log_work(features))
        merged = dict(zip(self.training_keys, self.training_log_ms)) | dict(zip(map(str, keys), np.log(times)))
        booster = xgb.train(self._train_params(), data, num_boost_round=rounds, xgb_model=self.booster)
        provenance = {**self.provenance, "boosted": [*self.provenance.get("boosted", []), f"+{len(keys)}x{rounds}"]}
        return XGBCostModel(**self.params(), provenance=provenance, training_keys=list(merged),
                            training_log_ms=[float(v) for v in merged.values()], booster=booster)

    def refit(self, keys: Sequence[str], times_ms: Sequence[float], note: str = "") -> XGBCostModel:
        """A new model with the same parameters trained on this one's data plus ``keys`` (which win where both have
        a key): how the hybrid cost source folds its new measurements in."""
        merged = dict(zip(self.training_keys, np.exp(self.training_log_ms)))
        merged.update(zip(keys, times_ms))
        provenance = {**self.provenance, "refits": [*self.provenance.get("refits", []), note or f"+{len(keys)}"]}
        return XGBCostModel(**self.params()).fit(list(merged), list(merged.values()), provenance)

    def predict(self, keys: Sequence[str]) -> np.ndarray:
        """Milliseconds per key (regression), or for a ranking model a score where lower means faster."""
        if self.booster is None:
            raise ModelError("the model is not trained: call fit or load a model file")
        if not len(keys):
            return np.zeros(0)
        features = feature_matrix(keys)
        raw = self.booster.predict(xgb.DMatrix(features, feature_names=list(FEATURE_NAMES))).astype(np.float64)
        return np.exp(raw + log_work(features)) if self.predicts_times else -raw

    # ------------------------------------------------------------------------------------------------ save / load
    def save(self, path: str | Path) -> Path:
        """Write the model file (JSON; compact and gzip-compressed for a name ending in ``.gz``), atomically."""
        from solvers.problem import write_json_atomic, write_text_atomic

        if self.booster is None:
            raise ModelError("cannot save an untrained model")
        document = {"format": FORMAT, "feature_version": FEATURE_VERSION, "vector_unit": HOST.name,
                    "feature_names": list(FEATURE_NAMES),
                    "params": self.params(), "provenance": self.provenance,
                    "training": {"keys": self.training_keys, "log_ms": self.training_log_ms},
                    "booster": json.loads(bytes(self.booster.save_raw("json")).decode())}
        path = Path(path)
        if _compressed(path):
            write_text_atomic(path, json.dumps(document, separators=(",", ":"), allow_nan=False), opener=gzip.open)
        else:
            write_json_atomic(path, document)
        return path

    @classmethod
    def load(cls, path: str | Path) -> XGBCostModel:
        """Read a model file; ``ModelError`` names what is wrong with one that cannot be used."""
        path = Path(path)
        try:
            document = json.loads(_read(path))
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError, InputFileError) as exc:
            raise ModelError(f"{path}: not a readable cost-model file ({exc})") from exc
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ModelError(f"{path}: not a tessera cost-model file")
        version = document.get("feature_version")
        if version != FEATURE_VERSION:
            raise ModelError(f"{path}: trained on feature version {version}, this tessera computes version "
                             f"{FEATURE_VERSION}; retrain it with `tessera costmodel train`")
        unit = document.get("vector_unit", HOST.name)  # older files: the unit is not known
        if unit != HOST.name:
            raise ModelError(f"{path}: trained on a host with {unit} (its features count {unit} lanes and registers), "
                             f"this host has {HOST.name}; retrain it here with `tessera costmodel train`")
        try:
            model = cls(**document["params"], provenance=document["provenance"],
                        training_keys=list(document["training"]["keys"]),
                        training_log_ms=[float(v) for v in document["training"]["log_ms"]])
            booster = xgb.Booster()
            booster.load_model(bytearray(json.dumps(document["booster"]).encode()))
        except (KeyError, TypeError, xgb.core.XGBoostError) as exc:
            raise ModelError(f"{path}: damaged cost-model file ({exc})") from exc
        model.booster = booster
        return model


def _compressed(path: Path) -> bool:
    return path.suffix.lower() == ".gz"


def _read(path: Path) -> str:
    """The text of the model file ``path``, decompressed if its name ends in ``.gz``."""
    if not _compressed(path):
        return read_text(path)
    with gzip.open(checked_input(path), "rt", encoding="utf-8") as stream:
        return read_limited(stream, path)
