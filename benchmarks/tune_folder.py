"""A ``tessera tune`` output folder and its cost cache as a benchmark's input: the two arguments, their checks, and
the network the tune ran on, loaded as it was."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tune", type=Path, required=True, help="a tessera tune output folder (its --out)")
    parser.add_argument("--cache", type=Path, required=True, help="the cost cache that tune ran with")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace, files: Sequence[str]) -> None:
    """One error line (``parser.error``) unless ``args.tune`` holds ``files`` and ``args.cache`` is a file."""
    missing = [name for name in files if not (args.tune / name).exists()]
    if missing:
        parser.error(f"{args.tune} is not a tessera tune output folder (missing {', '.join(missing)})")
    if not args.cache.is_file():
        parser.error(f"no cache at {args.cache}")


def load(tune: Path) -> tuple[dict[str, Any], Any, str, dict[str, Any]]:
    """The tune's ``summary.json`` and its network (graph, name and arguments, ``experiments.extraction.load_network``)
    as the tune loaded it, with the tune's threads reserved for the timing pool."""
    from experiments.extraction import load_network
    from search.threads import reserve_pool

    summary = json.loads((tune / "summary.json").read_text())
    reserve_pool(summary["threads"])
    given = summary["args"]
    shape = given.get("input_shape")  # a network bound by its input shape records its batch and size beside it
    graph, name, args = load_network(summary["model"], batch=None if shape else given["batch"],
                                     image_size=None if shape else given["image_size"], seed=given["seed"],
                                     input_shape=shape)
    return summary, graph, name, args


def kernel_tasks(graph: Any, choices: dict[str, Any]) -> dict[str, Any]:
    """The kernel tasks (by key) that a plan's ``choices`` (node -> candidate) run on ``graph``."""
    from cost_models.tasks import KernelTask
    from search.candidates import kernel_spec
    from search.kinds import KernelKind, get_kind

    return {task.key: task for task in (KernelTask(kernel_spec(graph.op(node), candidate))
                                        for node, candidate in choices.items()
                                        if isinstance(get_kind(graph.op(node).kind), KernelKind))}
