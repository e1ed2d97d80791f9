"""The bf16 side of the dot-product templates (``search.templates.dot``): its micro-kernels, the rounding of fp32
data to bf16 in TIR and the weights packed as bf16, and the generation of these kernels in the cost cache's keys."""

from __future__ import annotations

import numpy as np

from search.bf16_bits import STORAGE, to_bf16_bits
from search.layouts import BF16 as BF16_STORED
from search.layouts import storage_of, stored_as
from search.precision import AMX, DOT, KNOB
from search.templates import dot
from search.templates.workloads import KernelSpec, Knobs

# Part of a bf16 kernel's cache key (``cost_models.tasks``): bump it whenever these kernels (their templates or the
# micro-kernels) change what they generate, so that their old timings are not reused and the fp32 ones still are.
# 2: a stride-1 convolution runs its output rows as one run of pixels per call; a strided 1x1 one packs what it reads.
# 3: each call applies the epilogue to its own pixels (no separate pass over the whole output). 4: a row of taps that
# fits one block with the channels (a stem's) is folded into the channels. 5: the AVX-512 BF16 kernel splits a run into
# tiles of even sizes (a row of 7 pixels: one tile of 7, not 4 + 1 + 1 + 1); packing drops the bounds that always hold.
# 6: a strided convolution whose output rows have at most 16 pixels computes four of them per call, one tile each;
# folded taps are packed from a zero-padded copy of the input whose channels are padded to a power of two; a stride-1
# convolution's calls cycle through its weights where they are smaller than an image's input.
VERSION = 6
BF16 = dot.DotProduct(
    KNOB, STORAGE, STORAGE, "float32",
    {AMX: "tessera_bf16_conv_row_amx", DOT: "tessera_bf16_conv_row_dot"},
    {AMX: "tessera_bf16_conv_rows_amx", DOT: "tessera_bf16_conv_rows_dot"})
BLOCK = BF16.block  # input channels per block: one 64-byte row of bf16
VALUE_BLOCKS = (BLOCK, dot.LANES)
"""The channel blocks of the bf16 values the kernels read and write (``bf16_layout``), preferred first."""


def is_bf16(knobs: Knobs) -> bool:
    return KNOB in dict(knobs)


def stores_bf16(spec: KernelSpec) -> bool:
    """Whether the kernel reads or writes bf16 values (a layout of ``bf16`` storage on either side)."""
    return BF16_STORED in (storage_of(spec.in_layout), storage_of(spec.out_layout))


def bf16_layout(axes: str, extent: int) -> str | None:
    """The layout of bf16 values the kernels read and write, ``axes`` (``NCHW``, ``CN``) blocked by the channels (or
    features) ``extent``: ``{axes}32c.bf16`` where 32 divides it (one block of the packed input, read as it is), else
    ``{axes}16c.bf16`` where 16 does; None otherwise."""
    block = next((block for block in VALUE_BLOCKS if extent % block == 0), None)
    return None if block is None else stored_as(f"{axes}{block}c", BF16_STORED)


def pack_weights(weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``search.templates.dot.blocked_weights`` as bf16 bits: each row of the blocks a pair of input
    channels for every output channel."""
    return to_bf16_bits(dot.blocked_weights(np.asarray(weight, np.float32), BF16))
