"""bfloat16 values in numpy as their 16-bit patterns: how bf16 kernels, their packed weights and bf16-stored
activations hold them (TVM would legalise a bf16 buffer into fp32 arithmetic)."""

from __future__ import annotations

import numpy as np

STORAGE = "uint16"
"""The dtype of bf16 buffers: the values' bit patterns."""


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Values rounded to bf16 (to nearest, ties to even), as their 16-bit patterns (``STORAGE``)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(STORAGE)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bf16 bit patterns (exact)."""
    return (np.ascontiguousarray(bits, dtype=STORAGE).astype(np.uint32) << 16).view(np.float32)
