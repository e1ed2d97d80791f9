"""bf16 and int8 against fp32 on a network's kernels: time and numerical error of each.

``--network resnet50``: ResNet-50's distinct convolutions (batch 1, 224x224; bias and ReLU fused, as in the network),
in NCHW16c -> NCHW16c (the stem reads NCHW). ``--network mobilenet_v2``: MobileNetV2's distinct depthwise
convolutions (224x224; bias and ReLU6 fused) in NCHW16c -> NCHW16c. ``--network bert_base``: BERT-base's linear
layers (128 tokens; bias, and GELU or the residual fused, as in the network) in NC -> NC, and its attention's batched
matmuls, read and written where the heads are split and merged (the operands quantised over their own ranges). For
each: the fastest of the fp32 template's first ``--fp32-settings`` knob settings (Winograd among them where it
applies), every bf16 and int8 setting the host runs that the kernel has (``search.precision``: AMX tiles, AVX-512 BF16
dot products, AMX-INT8 tiles, AVX-512 VNNI dot products; the data quantised over its own range,
``search.templates.int8``; a kernel without one shows "-"), on the convolutions the host's first bf16 setting reading
and writing bf16 values (``search.templates.conv2d_dot.bf16_values``: ``NCHW32c.bf16`` where 32 divides the
channels; the stem reads its fp32 input) beside the same setting on fp32 values (a depthwise convolution has no bf16
setting on fp32 values: beside its fp32 best), each timed like a kernel (``cost_models.timer.time_kernel``:
random inputs, warm-up, repeats of at least 100 ms, median and interquartile range), one at a time, each in a process
of its own (``benchmarks.fresh``), and run once on random data against the float64 numpy reference
(``search.kinds.checks.kernel_error``). The last line sums the kernels once each (not weighted by how often the
network repeats them), each speed-up over the kernels its setting applies to. Run it with nothing else on the machine.

    .venv/bin/python benchmarks/bf16_kernels.py --threads 2 [--network bert_base]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fresh import time_fresh  # noqa: E402
from benchmarks.templates import resnet50_convs  # noqa: E402
from search.host import host, make_target  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.kinds import kernel_kind  # noqa: E402
from search.kinds.checks import kernel_error  # noqa: E402
from search.precision import (  # noqa: E402
    INSTRUCTIONS,
    INT8_INSTRUCTIONS,
    bf16_settings,
    int8_settings,
    precision_of,
)
from search.templates import BatchMatmulWorkload, Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec  # noqa: E402
from search.templates.conv2d_dot import bf16_values  # noqa: E402

LAYOUT = "NCHW16c"


def resnet50_kernels() -> list[tuple[str, str, KernelSpec]]:
    """(name, shape, spec) of ResNet-50's distinct convolutions."""
    kernels = []
    for name, wl in resnet50_convs():
        shape = f"{wl.in_channels}x{wl.height}x{wl.width} -> {wl.out_channels}, {wl.kernel[0]}x{wl.kernel[1]}/" \
                f"{wl.strides[0]}"
        kernels.append((name, shape, KernelSpec(wl, LAYOUT if wl.in_channels % 16 == 0 else "NCHW", LAYOUT, (),
                                                Epilogue(True, False, "relu"))))
    return kernels


def bert_base_kernels(tokens: int = 128, width: int = 768, heads: int = 12) -> list[tuple[str, str, KernelSpec]]:
    """(name, shape, spec) of BERT-base's distinct linear layers and attention matmuls."""
    inner, head = 4 * width, width // heads
    dense = [("projection", width, width, Epilogue(True, False)),
             ("ffn.up", width, inner, Epilogue(True, False, "gelu")), ("ffn.down", inner, width, Epilogue(True, True))]
    kernels = [(name, f"{tokens}x{i} -> {o}", KernelSpec(DenseWorkload(tokens, i, o), "NC", "NC", (), epilogue))
               for name, i, o, epilogue in dense]
    scores = BatchMatmulWorkload(heads, tokens, head, tokens, heads=heads)
    context = BatchMatmulWorkload(heads, tokens, tokens, head, heads=heads)
    none = Epilogue(bias=False)
    return kernels + [
        ("scores", f"{heads} x {tokens}x{head} @ {head}x{tokens}", KernelSpec(scores, "NHCW+NWCH", "BIJ", (), none)),
        ("context", f"{heads} x {tokens}x{tokens} @ {tokens}x{head}",
         KernelSpec(context, "NCHW+NHCW", "NHCW", (), none)),
    ]


def mobilenet_v2_kernels() -> list[tuple[str, str, KernelSpec]]:
    """(name, shape, spec) of MobileNetV2's distinct depthwise convolutions."""
    kernels = []
    for channels, size, stride in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
                                   (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1)):
        wl = Conv2DWorkload(1, channels, size, size, channels, (3, 3), (stride, stride), (1, 1, 1, 1), groups=channels)
        kernels.append((f"dw{channels}/{stride}", f"{channels}x{size}x{size}, 3x3/{stride}",
                        KernelSpec(wl, LAYOUT, LAYOUT, (), Epilogue(True, False, "relu6"))))
    return kernels


NETWORKS = {"resnet50": resnet50_kernels, "mobilenet_v2": mobilenet_v2_kernels, "bert_base": bert_base_kernels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--fp32-settings", type=int, default=4, help="fp32 knob settings tried per kernel")
    parser.add_argument("--network", choices=sorted(NETWORKS), default="resnet50")
    args = parser.parse_args()
    if not 1 <= args.threads <= len(os.sched_getaffinity(0)) or min(args.repeat, args.fp32_settings) < 1:
        parser.error("--threads from 1 to the usable cores, --repeat and --fp32-settings positive")
    settings = bf16_settings()
    if not settings:
        parser.error(f"this CPU ({host().cpu}) has no bf16 instructions ({' or '.join(INSTRUCTIONS.values())})")
    target = make_target(args.threads)
    settings += int8_settings()
    flags = [(INSTRUCTIONS if knob == "bf16" else INT8_INSTRUCTIONS)[value] for (knob, value), in settings]
    print(f"host: {host().cpu}, vector unit {HOST.name}, instructions {', '.join(flags)}; "
          f"{args.threads} threads, load {os.getloadavg()[0]:.2f}; {args.network}'s kernels, epilogues fused; "
          f"ms: median (IQR); error: max|out - ref| / max(1, max|ref|)\n")
    columns = " | ".join(f"{knob} {flag} | speed-up | error" for ((knob, _),), flag in zip(settings, flags))
    values = args.network != "bert_base"  # convolutions: bf16 values in and out too
    extra = f" | {flags[0]}, bf16 values in and out | over fp32 values | error" if values else ""
    print(f"| kernel | workload | fp32 best (setting) | error | {columns}{extra} |")
    print("| --- | --- | --- | ---: |" + " ---: | ---: | ---: |" * (len(settings) + values))
    totals = [0.0] * (1 + len(settings))
    stored_totals = [0.0, 0.0]  # bf16 values, and the same setting on fp32 values
    fp32_totals = [0.0] * len(settings)  # over the kernels each setting applies to
    for name, shape, spec in NETWORKS[args.network]():
        kind = kernel_kind(spec.workload.kind)
        fp32 = [k for k in kind.knob_space(spec) if precision_of(k) == "fp32"][: args.fp32_settings]
        timed = [(time_fresh(replace(spec, knobs=k), args.threads, args.repeat), k) for k in fp32]
        best, knobs = min(timed, key=lambda item: item[0].median_ms)
        row = [f"{best.median_ms:.3f} ({best.iqr_ms:.3f}) ({_label(knobs)})",
               f"{kernel_error(replace(spec, knobs=knobs), target=target):.1e}"]
        totals[0] += best.median_ms
        first = None
        for index, reduced in enumerate(settings, start=1):
            if reduced not in kind.knob_space(spec):  # bf16 depthwise convolutions on fp32 values: none
                row += ["-", "-", "-"]
                continue
            built = replace(spec, knobs=reduced)
            timing = time_fresh(built, args.threads, args.repeat)
            totals[index] += timing.median_ms
            fp32_totals[index - 1] += best.median_ms
            row += [f"{timing.median_ms:.3f} ({timing.iqr_ms:.3f})", f"{best.median_ms / timing.median_ms:.2f}x",
                    f"{kernel_error(built, target=target):.1e}"]
            if index == 1:
                first = timing  # the first bf16 setting on fp32 values
        if values:
            wl = spec.workload
            stored = replace(spec, in_layout=bf16_values(wl.in_channels) or spec.in_layout,
                             out_layout=bf16_values(wl.out_channels), knobs=settings[0])
            timing = time_fresh(stored, args.threads, args.repeat)
            first = first or best
            stored_totals[0] += timing.median_ms
            stored_totals[1] += first.median_ms
            row += [f"{timing.median_ms:.3f} ({timing.iqr_ms:.3f})", f"{first.median_ms / timing.median_ms:.2f}x",
                    f"{kernel_error(stored, target=target):.1e}"]
        print(f"| {name} | {shape} | {' | '.join(row)} |", flush=True)
    sums = " | ".join(f"{t:.3f} | {f / t:.2f}x | " if t else "- | - | " for t, f in zip(totals[1:], fp32_totals))
    stored_sum = f"{stored_totals[0]:.3f} | {stored_totals[1] / stored_totals[0]:.2f}x | |" if values else ""
    print(f"| sum | | {totals[0]:.3f} | | {sums}{stored_sum}")
    print(f"\nload after: {os.getloadavg()[0]:.2f}")


def _label(knobs) -> str:
    return ",".join(f"{key}={value}" for key, value in knobs) or "default"


if __name__ == "__main__":
    main()
