"""Real-looking inputs for a text detector: lines of printed text on paper-like backgrounds, saved as a ``.npz``.

Each sample is an image drawn from its own seed: a light paper tint (one in five dark, with light text) under a smooth
lighting gradient, a few ruled lines and boxes, 3 to 10 lines of words (shop, invoice and form vocabulary, prices,
dates and codes) in DejaVu Sans, Serif or Mono (matplotlib's own fonts) at 9 to 28 pixels, dark inks, a few degrees of
rotation, then sensor-like Gaussian noise. The image is normalised as PP-OCR's DBNet detectors read it in RapidOCR
(BGR channel order, ``(pixel / 255 - 0.5) / 0.5``, NCHW) and stored under the model's input name, ``(samples, 1, 3, H,
W)``: the calibration format of ``tessera tune --calibration-data`` and of ``benchmarks/peers.py --inputs``.
``--png`` also writes the first image, to look at.

    python benchmarks/text_images.py --out timed.npz --samples 1 --seed 0 --size 320
    python benchmarks/text_images.py --out calibration.npz --samples 8 --seed 1 --size 320
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

WORDS = ("TOTAL", "Subtotal", "VAT", "Invoice", "No.", "Date", "Qty", "Price", "Amount", "Cash", "Change", "Card",
         "Thank you", "Receipt", "Customer", "Address", "Street", "Tel", "Order", "Item", "Coffee", "Bread", "Milk",
         "Apples", "Rice", "Tea", "Sugar", "Station", "Platform", "Exit", "Open", "Closed", "Monday", "Friday",
         "Name", "Signature", "Account", "Balance", "Due", "Paid", "Discount", "Member", "Points", "Store", "Market")
FONTS = ("DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono")
MEAN, STD = 0.5, 0.5
"""RapidOCR's normalisation of the detector's input (its ``config.yaml``, ``Det``)."""


def token(rng: np.random.Generator) -> str:
    """A word, a price, a date or a code."""
    kind = rng.integers(6)
    if kind == 0:
        return f"{rng.integers(1, 500)}.{rng.integers(100):02d}"
    if kind == 1:
        return f"{rng.integers(1, 29):02d}/{rng.integers(1, 13):02d}/20{rng.integers(10, 27)}"
    if kind == 2:
        return "".join(rng.choice(list("ABCDEFGHJKLMNPRSTUVWXYZ0123456789"), rng.integers(4, 9)))
    return str(rng.choice(WORDS))


def image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """One RGB image (height, width, 3) of uint8."""
    dark = rng.random() < 0.2
    paper = rng.uniform(0.05, 0.25, 3) if dark else rng.uniform(0.8, 1.0, 3)
    ys, xs = np.mgrid[0:height, 0:width] / max(height, width)
    light = 1.0 + rng.uniform(-0.15, 0.15) * xs + rng.uniform(-0.15, 0.15) * ys
    background = np.clip(paper[None, None, :] * light[..., None], 0, 1)
    figure = Figure(figsize=(width / 100, height / 100), dpi=100)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.imshow(background, extent=(0, 1, 0, 1), aspect="auto", interpolation="bilinear")
    axes.set_xlim(0, 1), axes.set_ylim(0, 1), axes.axis("off")
    for _ in range(rng.integers(0, 4)):  # ruled lines and boxes
        x, y, w, h = rng.uniform(0, 0.7), rng.uniform(0, 0.9), rng.uniform(0.2, 0.6), rng.uniform(0.02, 0.3)
        axes.add_patch(_box(x, y, w, h, rng, dark))
    lines = rng.integers(3, 11)
    for row in range(lines):
        words = " ".join(token(rng) for _ in range(rng.integers(1, 6)))
        ink = rng.uniform(0.75, 1.0, 3) if dark else rng.uniform(0.0, 0.35, 3)
        axes.text(rng.uniform(0.02, 0.45), 1 - (row + rng.uniform(0.6, 1.0)) / (lines + 1), words,
                  fontsize=rng.uniform(9, 28) * 0.72, family=str(rng.choice(FONTS)), color=tuple(ink),
                  rotation=rng.uniform(-4, 4), weight="bold" if rng.random() < 0.3 else "normal",
                  clip_on=True)
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[..., :3].astype(np.float32)
    return np.clip(rgb + rng.normal(0, rng.uniform(1, 8), rgb.shape), 0, 255).astype(np.uint8)


def _box(x: float, y: float, w: float, h: float, rng: np.random.Generator, dark: bool):
    from matplotlib.patches import Rectangle

    edge = rng.uniform(0.6, 0.9) if dark else rng.uniform(0.2, 0.6)
    return Rectangle((x, y), w, h, fill=False, edgecolor=(edge,) * 3, linewidth=rng.uniform(0.5, 1.5))


def normalised(rgb: np.ndarray) -> np.ndarray:
    """RapidOCR's detector input of one RGB image: BGR, scaled and centred, (1, 3, H, W) float32."""
    bgr = rgb[..., ::-1].astype(np.float32) / 255.0
    return ((bgr - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the .npz to write")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1, help="the first sample's seed (the next ones count up)")
    parser.add_argument("--size", default="320", help="H,W or one side (default: %(default)s)")
    parser.add_argument("--input", default="x", help="the model's input name (default: %(default)s, PP-OCR's)")
    parser.add_argument("--png", type=Path, default=None, help="also write the first image here")
    args = parser.parse_args(argv)
    try:
        height, width = (int(v) for v in (args.size.split(",") * 2)[:2])
    except ValueError:
        parser.error(f"--size {args.size}: expected H,W or one side")
    if args.samples < 1 or height < 32 or width < 32:
        parser.error("--samples must be at least 1 and the sides at least 32 pixels")
    images = [image(np.random.default_rng(args.seed + i), height, width) for i in range(args.samples)]
    np.savez(args.out, **{args.input: np.stack([normalised(rgb) for rgb in images])})
    if args.png:
        from matplotlib.image import imsave

        imsave(args.png, images[0])
    last = args.seed + args.samples - 1
    print(f"wrote {args.out}: {args.samples} images of {height}x{width}, seeds {args.seed}..{last}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
