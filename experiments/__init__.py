"""The whole loop from Python, as the ``tessera`` command line runs it (the CLI is a thin layer over these names).

==========================  ====================================================================================
``load_network``            a zoo name, ``.onnx`` file or Relax module as (operator graph, label, load arguments)
``extract``                 measure (what the cost cache lacks of) a network's candidate space into a cost problem
``solvers.solve``           solve it (``auto`` by default); ``Extracted.plan(solution)`` makes the plan
``export_plan``             compile a plan (or a uniform baseline) for a network, checked against stock TVM
``tune``                    all of the above, the plan timed against the uniform baselines, calibrated rounds
``run_demo``                ``tune`` on the demo's small network
``load_config`` / ``run_experiment`` / ``write_report``   experiment grids on Ray, tracked in MLflow
==========================  ====================================================================================

The names are imported on first use, so that ``import experiments`` stays light (no TVM, Ray or MLflow).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Extracted": "experiments.extraction",
    "extract": "experiments.extraction",
    "load_network": "experiments.extraction",
    "tune": "experiments.tune",
    "export_plan": "experiments.deploy",
    "run_demo": "experiments.demo",
    "load_config": "experiments.config",
    "run_experiment": "experiments.runner",
    "write_report": "experiments.report",
}
"""Exported name -> the module defining it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'experiments' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
