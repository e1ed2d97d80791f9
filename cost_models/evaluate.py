"""How well a cost model orders and predicts a network's candidates: the metrics of the learned-cost-model literature.

A network contributes one ``Group`` per node: its candidates' task keys, their measured times, and the node's weight
(its best measured time over the sum of every node's best, i.e. its share of the network at its best).

- pairwise accuracy: over the pairs of candidates of a node with different times, the share the model orders
  correctly (nodes weighted by their number of pairs);
- top-k score (TenSet): per node, the best time over the best true time among the model's k top-ranked
  candidates, averaged with the node weights (1.0 means the model's top k always hold the best candidate);
- R^2 of log time, for models that predict times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cost_models.xgb_model import XGBCostModel


@dataclass(frozen=True)
class Group:
    """One node's candidates: ``keys`` with measured ``true_ms``, and the node's ``weight`` in its network."""

    name: str
    keys: tuple[str, ...]
    true_ms: tuple[float, ...]
    weight: float = 1.0


@dataclass(frozen=True)
class Metrics:
    pairwise_accuracy: float
    top1: float
    top5: float
    r2_log: float | None
    groups: int
    records: int

    def to_dict(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def network_groups(nodes: dict[str, dict[str, float]]) -> list[Group]:
    """Groups of a network from node -> (task key -> measured ms), weighted by each node's best time."""
    best = {node: min(times.values()) for node, times in nodes.items() if times}
    total = sum(best.values())
    return [Group(node, tuple(nodes[node]), tuple(nodes[node].values()), best[node] / total) for node in best]


def pairwise_accuracy(true: np.ndarray, score: np.ndarray) -> tuple[int, int]:
    """(correctly ordered, comparable) pairs; a score tie counts as half right."""
    dt = np.sign(true[:, None] - true[None, :])
    ds = np.sign(score[:, None] - score[None, :])
    upper = np.triu(np.ones_like(dt, dtype=bool), 1) & (dt != 0)
    right = np.sum((dt == ds) & upper) + 0.5 * np.sum((ds == 0) & upper)
    return right, int(upper.sum())


def top_k(true: np.ndarray, score: np.ndarray, k: int) -> float:
    """Best true time over the best true time among the ``k`` lowest-scored candidates."""
    picks = np.argsort(score, kind="stable")[:k]
    return float(true.min() / true[picks].min())


def evaluate(model: XGBCostModel, groups: Sequence[Group]) -> Metrics:
    """The metrics of ``model`` on ``groups`` (R^2 only for a model that predicts times)."""
    groups = [g for g in groups if g.keys]
    if not groups:
        raise ValueError("nothing to evaluate on: no node has measured candidates")
    scores = model.predict([key for g in groups for key in g.keys])
    right = pairs = 0.0
    tops = {1: 0.0, 5: 0.0}
    weights = sum(g.weight for g in groups)
    offset = 0
    for g in groups:
        true = np.asarray(g.true_ms, dtype=np.float64)
        score = scores[offset : offset + len(true)]
        offset += len(true)
        r, p = pairwise_accuracy(true, score)
        right, pairs = right + r, pairs + p
        for k in tops:
            tops[k] += g.weight * top_k(true, score, k) / weights
    r2 = None
    if model.predicts_times:
        true_log = np.log([t for g in groups for t in g.true_ms])
        residual = np.sum((np.log(scores) - true_log) ** 2)
        r2 = float(1 - residual / np.sum((true_log - true_log.mean()) ** 2))
    tops = {k: min(value, 1.0) for k, value in tops.items()}  # each term is <= 1; only rounding can pass it
    return Metrics(float(right / pairs) if pairs else 1.0, tops[1], tops[5], r2, len(groups), offset)
