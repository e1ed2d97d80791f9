"""A marker for tests of an optional engine (the ``peers`` extra): skipped at collection when the engine is not
installed, before their fixtures build anything."""

from __future__ import annotations

import importlib.util

import pytest


def needs(module: str) -> pytest.MarkDecorator:
    """Skip unless ``module`` can be imported."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed")
