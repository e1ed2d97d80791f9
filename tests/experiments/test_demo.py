"""``tessera demo`` at a smaller size: the real loop from an empty cache, its files, its lines and its next steps."""

from __future__ import annotations

import json
from dataclasses import replace

from cost_models.sources import default_source
from experiments.demo import DEMO, run_demo
from search.artifact import load_artifact

SMALL = replace(DEMO, image_size=32, layouts="NCHW,NCHW8c", space_size=1, repeat=2, calibrate=0)
"""The demo at a smaller size and without its calibration round (tests/experiments/test_tune.py covers calibration)."""


def test_the_demo_tunes_a_real_network_from_an_empty_cache_and_names_what_it_wrote(tmp_path):
    lines: list[str] = []
    out = tmp_path / "demo"
    summary = run_demo(out, cache=tmp_path / "costs.sqlite", settings=SMALL, echo=lines.append)
    assert summary["model"] == DEMO.model and summary["input_shapes"] == {"data": [1, 3, 32, 32]}
    counts = summary["measurements"]
    assert 0 < counts["new"] <= counts["tasks"] and counts["cached"] == 0  # the cache was empty
    if default_source() == "measured":  # a host tessera ships no cost model for: every candidate measured
        assert counts["new"] == counts["tasks"]
    assert "calibration" not in summary
    assert load_artifact(out / "artifact").manifest["numerical_check"]["passed"]
    assert json.loads((out / "summary.json").read_text()) == summary
    text = "\n".join(lines)
    assert lines[0].startswith("tessera demo: resnet18 at 32x32")
    for baseline in summary["baselines"]:  # the plan and the baselines side by side, predicted and measured
        assert f"baseline {baseline}: predicted" in text
    assert "plan: predicted" in text and "measured" in text
    for name in ("plan.json", "problem.json", "artifact", "summary.json"):
        assert str(out / name) in text
    assert f"tessera run {out / 'artifact'}" in text and f"tessera tune {DEMO.model}" in text
