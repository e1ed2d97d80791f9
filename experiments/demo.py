"""``tessera demo``: the whole loop on a small real network, sized to finish in a few minutes from an empty cache.

It is ``experiments.tune.tune`` with the settings of ``DEMO`` and tune's default costs: resnet18 at a reduced input
size, three layouts and a small schedule space per node, so that measuring (the candidates the shipped cost model
ranks best and every one the plan uses, or every candidate where no model ships for the host), solving, exporting
and checking the plan and the uniform baselines, timing them side by side and one calibration round fit a first
session. The files it writes are
tune's, and it ends by naming them and the commands to try next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cost_models.cache import DEFAULT_CACHE


@dataclass(frozen=True)
class DemoSettings:
    """What the demo tunes: the model, its input size and the candidate space, and the timing rounds."""

    model: str = "resnet18"
    image_size: int = 112
    layouts: str = "NCHW,NHWC,NCHW16c"
    space_size: int = 4
    repeat: int = 5
    calibrate: int = 1


DEMO = DemoSettings()
"""The settings ``tessera demo`` runs with (docs/end_to_end.md has how long it took)."""


def run_demo(out: str | Path, *, cache: str | Path = DEFAULT_CACHE, settings: DemoSettings = DEMO,
             echo: Callable[[str], None] = print, progress: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Tune ``settings.model`` into ``out`` with the cost cache ``cache``; every printed line goes to ``echo``.

    Returns tune's summary. The last lines name the files written and the next commands to try.

    Examples
    --------
    >>> summary = run_demo("tessera-demo")  # doctest: +SKIP
    >>> summary["plan"]["latency"]["median_ms"]  # doctest: +SKIP
    """
    from cost_models.sources import default_source
    from experiments.tune import tune

    s = settings
    measure = {"selective": "the candidates the shipped cost model ranks best and every one the plan uses",
               "measured": "every candidate"}[default_source()]
    echo(f"tessera demo: {s.model} at {s.image_size}x{s.image_size}, layouts {s.layouts}, {s.space_size} schedules "
         f"per operator and layout: measure {measure} (what the cache {cache} lacks), solve the cost problem, "
         f"export and check the plan, time it against uniform layouts, calibrate once on the network's own profile")
    params = {key: value for key, value in asdict(s).items() if key not in ("model", "repeat", "calibrate")}
    summary = tune(s.model, out, repeat=s.repeat, calibrate=s.calibrate, cache=cache, echo=echo, progress=progress,
                   **params)
    for line in next_steps(summary, s):
        echo(line)
    return summary


def next_steps(summary: dict[str, Any], settings: DemoSettings = DEMO) -> list[str]:
    """What the demo wrote and what to run next."""
    files = summary["files"]
    out = Path(files["plan"]).parent
    lines = ["", f"wrote {out}/:",
             f"  {files['plan']}  the layout and schedule chosen per operator (tessera export --plan reads it)",
             f"  {files['picture']}  a picture of the plan: layouts, schedules, costs, transforms (tessera show)",
             f"  {files['problem']}  the measured cost problem (tessera solve reads it)",
             f"  {files['artifact']}/  the compiled plan, checked against stock TVM (tessera run times it)",
             f"  {out / 'summary.json'}  everything printed above, as JSON"]
    lines += ["next:",
              f"  tessera run {files['artifact']}                # time the compiled plan again",
              f"  tessera solve {files['problem']} --solver pbqp  # another solver on the same problem",
              f"  tessera tune {settings.model} --out tuned/            # the full network and space "
              f"(longer: every layout, up to 50 schedules per operator)"]
    return lines
