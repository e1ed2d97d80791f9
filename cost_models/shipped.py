"""The cost models tessera ships, one per vector unit (``search.isa.UNITS``), and the records they are trained on.

``cost_models/pretrained/<unit>/*.jsonl.gz`` hold successful timings of zoo networks' default candidate spaces in
``tessera cache export``'s format, a file per host (each line's context names it); ``cost_models/pretrained/
<unit>.json.gz`` is the regression model trained on all of a unit's records, written on a host of that unit by
``tessera costmodel train --shipped --out cost_models/pretrained/<unit>.json.gz``. A model's features count its unit's
lanes and registers, so a host loads its own unit's model or none.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cost_models.errors import ModelError
from search.isa import HOST, UNITS

if TYPE_CHECKING:
    from cost_models.xgb_model import XGBCostModel

DIRECTORY = Path(__file__).with_name("pretrained")


def model_path(unit: str = HOST.name) -> Path:
    """Where the shipped model of ``unit`` is (or would be)."""
    return DIRECTORY / f"{unit}.json.gz"


def shipped_units() -> list[str]:
    """The vector units tessera ships a model for."""
    return sorted(path.name.removesuffix(".json.gz") for path in DIRECTORY.glob("*.json.gz"))


def shipped_model(unit: str = HOST.name) -> XGBCostModel:
    """The shipped model of ``unit`` (this host's by default); ``ModelError`` when there is none."""
    from cost_models.xgb_model import XGBCostModel

    path = model_path(unit)
    if not path.is_file():
        raise ModelError(f"tessera ships no cost model for {unit} hosts (only for: {', '.join(shipped_units()) or '-'})"
                         "; train one on this host's measurements with `tessera costmodel train` and give it with "
                         "--cost-model")
    return XGBCostModel.load(path)


def record_files(unit: str = HOST.name) -> list[Path]:
    """The shipped record files of ``unit``, a file per host."""
    return sorted((DIRECTORY / unit).glob("*.jsonl.gz"))


def shipped_records(unit: str = HOST.name) -> dict[str, float]:
    """Task key -> milliseconds of every successful shipped record of ``unit`` whose kind this tessera featurises (a
    key timed on several hosts: the median of their times). The keys are read with ``unit``'s knob spaces, whichever
    host reads them: an AVX2 host's register tiles are no settings of the AVX-512 templates."""
    from cost_models.exchange import read_records
    from cost_models.learned import featurisable
    from search.templates.common import sized_for

    times: dict[str, list[float]] = defaultdict(list)
    for path in record_files(unit):
        for _, key, record in read_records(path):
            if record.ok:
                times[key].append(record.median_ms)
    with sized_for(UNITS.get(unit, HOST)):
        usable, _ = featurisable(list(times))
    return {key: float(np.median(times[key])) for key in usable}
