"""Train and evaluate the learned cost model on the cost cache, by zoo network: ``tessera costmodel train|eval``.

The cache is keyed by what was measured, not by which network needed it, so a network's data is found by listing
its candidate space's tasks (as ``extract`` would) and looking them up under this machine's context. Evaluation on a
held-out network leaves out the nodes whose workload the model was trained on, so it measures generalisation to new
shapes, not recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from search.errors import SearchError

if TYPE_CHECKING:
    from search.zoo.shapes import ShapesLike


@dataclass(frozen=True)
class NetworkData:
    """A network's measured tasks: node -> (kernel key -> ms), and every measured task key (kernels and
    transforms) with its time."""

    model: str
    nodes: dict[str, dict[str, float]]
    records: dict[str, float]
    missing: int  # tasks of the space the cache has no successful record of


def network_data(model: Any, cache: str | Path, *, threads: int | None = None, batch: int | None = None,
                 image_size: int | None = None, input_shape: ShapesLike = None,
                 layouts: Sequence[str] | str | None = None, space_size: int | None = None) -> NetworkData:
    """What ``cache`` holds of ``model``'s candidate space: ``model`` is a zoo name, an .onnx path or a Relax module
    (see ``experiments.extraction.extract`` for the options)."""
    from cost_models.cache import CostCache
    from cost_models.measure import machine_context
    from cost_models.pricing import kernel_task, measurement_tasks
    from experiments.extraction import load_network
    from search import space as spaces
    from search.host import make_target
    from search.threads import use_threads

    threads = use_threads(threads)
    graph, label, _ = load_network(model, batch=batch, image_size=image_size, input_shape=input_shape)
    layouts = spaces.parse_layouts(spaces.DEFAULT_LAYOUTS if layouts is None else layouts)
    space = spaces.tuning_space(graph, layouts=layouts, space_size=spaces.check_space_size(
        spaces.DEFAULT_SPACE_SIZE if space_size is None else space_size))
    tasks = [task for task in measurement_tasks(graph, space) if not task.free]
    found = CostCache(cache).get_many(machine_context(make_target(threads), threads), [t.key for t in tasks])
    records = {key: record.median_ms for key, record in found.items() if record.ok}
    nodes = {}
    for node, candidates in space.items():
        kernels = [kernel_task(graph, node, candidate) for candidate in candidates]
        times = {task.key: records[task.key] for task in kernels if task is not None and task.key in records}
        if times:
            nodes[node] = times
    return NetworkData(label, nodes, records, len(tasks) - len(records))


def train(cache: str | Path | None, models: Sequence[Any], out: str | Path, *, objective: str = "regression",
          seed: int = 0, shipped: bool = False, **space: Any) -> tuple[Any, list[NetworkData]]:
    """Fit a model on what ``cache`` holds of ``models``' spaces and, with ``shipped``, on the records tessera ships
    for this host's vector unit (``cost_models.shipped``; this machine's own time wins for a task both have), and save
    it to ``out``."""
    from cost_models.shipped import record_files, shipped_records
    from cost_models.xgb_model import XGBCostModel

    records: dict[str, float] = shipped_records() if shipped else {}
    data = [network_data(model, cache, **space) for model in models]
    for network in data:
        records.update(network.records)
    provenance: dict[str, Any] = {"models": [network.model for network in data]}
    if models:
        provenance |= {"cache": str(Path(cache).expanduser()), "space": space}
    if shipped:
        provenance["shipped"] = [path.name for path in record_files()]
    model = XGBCostModel(objective=objective, seed=seed).fit(list(records), list(records.values()), provenance)
    model.save(out)
    return model, data


def evaluate_on(model_file: str | Path, models: Sequence[Any], cache: str | Path, **space: Any,
                ) -> list[dict[str, Any]]:
    """Per held-out network: the metrics of ``cost_models.evaluate`` on its nodes whose workload the model has not
    seen, and how many nodes were left out as seen."""
    from cost_models.evaluate import evaluate, network_groups
    from cost_models.features import group_key
    from cost_models.xgb_model import XGBCostModel

    model = XGBCostModel.load(model_file)
    seen = {group_key(key) for key in model.training_keys}
    rows = []
    for network in (network_data(name, cache, **space) for name in models):
        unseen = {node: times for node, times in network.nodes.items() if group_key(next(iter(times))) not in seen}
        if not unseen:
            raise SearchError(f"{network.model}: no measured node with a workload the model was not trained on")
        metrics = evaluate(model, network_groups(unseen))
        rows.append({"model": network.model, "objective": model.objective, **metrics.to_dict(),
                     "seen_nodes_left_out": len(network.nodes) - len(unseen), "unmeasured_tasks": network.missing})
    return rows
