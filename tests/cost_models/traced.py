"""Build and run functions that do what the default ones do and log when they ran and on which cores
(``MeasuredCosts(f_build=..., f_run=...)`` takes their dotted paths): one JSON line per job in the file named by
``VARIABLE`` in the workers' environment."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cost_models.workers import Artifact, RunSettings, build_artifact, run_artifact

VARIABLE = "TESSERA_TEST_TRACE"


def _logged(what: str, job, *args):
    start = time.time()
    result = job(*args)
    line = {"what": what, "start": start, "end": time.time(), "cores": sorted(os.sched_getaffinity(0))}
    with open(os.environ[VARIABLE], "a") as trace:
        trace.write(json.dumps(line) + "\n")
    return result


def build(task: object, target: str, out_dir: str) -> Artifact:
    return _logged("build", build_artifact, task, target, out_dir)


def run(artifact: Artifact, settings: RunSettings):
    return _logged("run", run_artifact, artifact, settings)


def jobs(path: Path, what: str) -> list[dict]:
    """The logged jobs of one kind ("build" or "run")."""
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["what"] == what]


def overlapping(first: list[dict], second: list[dict]) -> bool:
    """Whether a job of ``first`` ran while one of ``second`` did."""
    return any(a["start"] < b["end"] and b["start"] < a["end"] for a in first for b in second)
