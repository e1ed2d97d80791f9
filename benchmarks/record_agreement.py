"""How far two measurements of one network's candidates agree on their order: the ceiling that a host's measurement
noise puts on a cost model's accuracy, beside a model's accuracy on the same pairs.

For each ``--runs MODEL=CACHE_A,CACHE_B`` (two cost caches that each measured ``MODEL``'s default space, or part of
it, on this host: a full and a selective ``tessera tune``, say), every node's candidates that both caches timed are
ordered by ``CACHE_B``'s times and judged against ``CACHE_A``'s, with the metrics of ``cost_models.evaluate``
(pairwise accuracy, TenSet's top-1 and top-5 scores, nodes weighted by their best time in ``CACHE_A``), then the same
pairs ordered by each ``--cost-model`` (default: the model tessera ships for this host's vector unit). A model cannot
be shown more accurate than the two runs agree: where they agree on 0.7 of the pairs, ``CACHE_A``'s order is itself
that uncertain. Also printed: the median and 90th percentile of |log(B / A)| over the tasks both timed (0.10 is about
10% apart). Nothing is built or timed.

    .venv/bin/python benchmarks/record_agreement.py --runs resnet50=W/full/costs.sqlite,W/selective/costs.sqlite
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cost_models.evaluate import pairwise_accuracy, top_k  # noqa: E402
from experiments.costmodel import network_data  # noqa: E402
from search.host import host  # noqa: E402
from search.isa import HOST  # noqa: E402
from search.zoo import MODELS  # noqa: E402

Pairs = list[tuple[np.ndarray, np.ndarray]]  # per node: the times in A, the scores judged against them


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", action="append", required=True, metavar="MODEL=CACHE_A,CACHE_B",
                        help="a zoo network and two caches that measured it (repeatable)")
    parser.add_argument("--cost-model", action="append", default=[], metavar="FILE",
                        help="a model file to judge on the same pairs (repeatable; default: the shipped model)")
    parser.add_argument("--threads", type=int, default=2, help="threads the records were timed with")
    args = parser.parse_args()
    runs = []
    for spec in args.runs:
        name, _, caches = spec.partition("=")
        paths = [Path(path) for path in caches.split(",")]
        if len(paths) != 2 or not name:
            parser.error(f"each --runs is MODEL=CACHE_A,CACHE_B, got {spec!r}")
        if name not in MODELS:
            parser.error(f"unknown model {name!r}: a zoo network ({', '.join(MODELS)})")
        for path in paths:
            if not path.is_file():
                parser.error(f"no cache at {path}")
        runs.append((name, *paths))
    for path in args.cost_model:
        if not Path(path).is_file():
            parser.error(f"no model file at {path}")
    if args.threads < 1:
        parser.error("--threads must be positive")
    args.runs = runs
    return args


def _metrics(pairs: Pairs, total: float) -> str:
    right = compared = weights = 0.0
    tops = {1: 0.0, 5: 0.0}
    for true, score in pairs:
        r, p = pairwise_accuracy(true, score)
        right, compared = right + r, compared + p
        weight = true.min() / total
        weights += weight
        for k in tops:
            tops[k] += weight * top_k(true, score, k)
    return f"{right / compared:.3f} | {tops[1] / weights:.3f} | {tops[5] / weights:.3f}"


def main() -> int:
    from cost_models.shipped import model_path, shipped_model
    from cost_models.xgb_model import XGBCostModel

    args = _arguments()
    models = {path: XGBCostModel.load(path) for path in args.cost_model}
    if not models:
        models = {str(model_path()): shipped_model()}
    print(f"Host: {host().cpu} ({HOST.name}); records timed with {args.threads} threads")
    print("| network | ordered by | nodes | pairs | pairwise | top-1 | top-5 | abs log(B/A): median, p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, first, second in args.runs:
        a = network_data(name, first, threads=args.threads).nodes
        b = network_data(name, second, threads=args.threads).nodes
        total = sum(min(times.values()) for times in a.values())
        common = {node: [key for key in times if key in b.get(node, {})] for node, times in a.items()}
        common = {node: keys for node, keys in common.items() if len(keys) > 1}
        truth = {node: np.array([a[node][key] for key in keys]) for node, keys in common.items()}
        runs = [(truth[node], np.array([b[node][key] for key in keys])) for node, keys in common.items()]
        pairs = sum(len(keys) * (len(keys) - 1) // 2 for keys in common.values())
        apart = np.abs(np.log(np.concatenate([other / true for true, other in runs])))
        print(f"| {name} | {second} | {len(common)} | {pairs} | {_metrics(runs, total)} | "
              f"{np.median(apart):.3f}, {np.quantile(apart, 0.9):.3f} |")
        for path, model in models.items():
            predicted = [(truth[node], model.predict(keys)) for node, keys in common.items()]
            print(f"| {name} | {path} | {len(common)} | {pairs} | {_metrics(predicted, total)} | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
