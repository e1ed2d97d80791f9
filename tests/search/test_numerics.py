"""The relative error of outputs against a reference."""

from __future__ import annotations

import numpy as np
import pytest

from search.numerics import relative_error


def test_relative_error_is_relative_to_the_reference_scale():
    ref = [np.array([10.0, -20.0])]
    assert relative_error([np.array([10.0, -20.002])], ref) == pytest.approx(1e-4)
    reference = [np.array([[2.0, -4.0]]), np.array([1.0])]
    assert relative_error(reference, reference) == 0.0
    assert relative_error([np.array([[2.0, -3.0]]), np.array([1.0])], reference) == 0.25


def test_other_shapes_or_another_number_of_outputs_are_infinitely_wrong():
    reference = [np.array([[2.0, -4.0]]), np.array([1.0])]
    assert relative_error([np.zeros(3)], [np.array([10.0, -20.0])]) == float("inf")
    assert relative_error([np.array([2.0, -4.0]), np.array([1.0])], reference) == np.inf
    assert relative_error(reference[:1], reference) == np.inf


def test_the_floor_measures_a_small_reference_absolutely():
    small = [np.array([1e-3, -2e-3], dtype=np.float32)]
    off = [np.array([1e-3, -1e-3], dtype=np.float32)]
    assert relative_error(off, small) == pytest.approx(0.5)
    assert relative_error(off, small, floor=1.0) == pytest.approx(1e-3)
