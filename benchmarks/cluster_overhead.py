"""What measuring on a Ray cluster costs per task beyond measuring locally, and a paper estimate of a network's whole
measurement on 1, 8 and 64 identical nodes.

A seeded sample of ``--tasks`` tasks of ``--model``'s candidate space (default densenet201 and the default space) is
measured from an empty cache by each path, in ``--rounds`` alternating rounds, each after a warm-up task that starts
its processes: locally (``MeasuredCosts``, this machine's cores as builders) and on a one-node Ray cluster started here
on this machine with token authentication (``ClusterCosts``, the node offering the same cores and one timing slot),
with the same batch size. Then each sampled task's build and timing are timed on their own, one at a time.

Printed: each path's wall time per task (median over rounds); the distributed path's scheduling and transfer overhead
per task, as a share of the median task time (one task's build plus its timing) and of the local time per task; and
the estimate for the model's whole space. The estimate's model is the cluster path's own: a node builds a batch on its
C cores in parallel, then times it one task at a time (a timing never overlaps a build or another timing on its node),
so a node spends mean build / C + mean timing + overhead per task, and N nodes share the tasks evenly (the driver only
stores records, assumed to keep up). For comparison, the bound of a design overlapping builds and timings on a node:
max(total build / (N C), total timing / N).

    .venv/bin/python benchmarks/cluster_overhead.py --model densenet201 --tasks 64 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))

from cost_models import CostCache, Task  # noqa: E402
from cost_models.cluster import TIMING_SLOT, Cluster  # noqa: E402
from cost_models.cluster_costs import ClusterCosts  # noqa: E402
from cost_models.measure import CostProvider, MeasuredCosts  # noqa: E402
from cost_models.pricing import measurement_tasks  # noqa: E402
from cost_models.workers import RunSettings, build_artifact, run_artifact  # noqa: E402
from experiments.extraction import load_network
from search import space as spaces  # noqa: E402
from search.host import make_target  # noqa: E402
from search.threads import use_threads  # noqa: E402


def sample(args: argparse.Namespace) -> tuple[list[Task], int]:
    """``--tasks`` + 1 distinct tasks of the model's space (the first one for warming up), and the space's count."""
    graph, _, _ = load_network(args.model, image_size=args.image_size)
    layouts = spaces.parse_layouts(args.layouts or spaces.DEFAULT_LAYOUTS)
    space = spaces.tuning_space(graph, layouts=layouts, space_size=args.space_size or spaces.DEFAULT_SPACE_SIZE)
    tasks = [task for task in measurement_tasks(graph, space) if not task.free]
    return random.Random(args.seed).sample(tasks, min(args.tasks + 1, len(tasks))), len(tasks)


def seconds_per_task(provider: CostProvider, warm_up: Task, tasks: list[Task]) -> float:
    """Wall seconds per task of measuring ``tasks`` once ``warm_up`` has started the provider's processes."""
    provider.measure([warm_up])
    start = time.perf_counter()
    provider.measure(tasks)
    return (time.perf_counter() - start) / len(tasks)


def phases(tasks: list[Task], target: str, settings: RunSettings) -> tuple[list[float], list[float]]:
    """Each task's build seconds (one process) and timing seconds (loading and timing its library)."""
    builds, timings = [], []
    with tempfile.TemporaryDirectory(prefix="tessera-phases-") as scratch:
        for task in tasks:
            start = time.perf_counter()
            artifact = build_artifact(task, target, scratch)
            built = time.perf_counter()
            run_artifact(artifact, settings)
            builds.append(built - start)
            timings.append(time.perf_counter() - built)
            Path(artifact.path).unlink()
    return builds, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="densenet201", help="zoo network whose space is sampled and estimated")
    parser.add_argument("--image-size", type=int, default=None, help="input size (default: the model's own)")
    parser.add_argument("--layouts", default=None, help="layouts of the space (default: tessera's default)")
    parser.add_argument("--space-size", type=int, default=None, help="candidates per node (default: tessera's)")
    parser.add_argument("--tasks", type=int, default=64, help="sampled tasks measured by each path")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two paths")
    parser.add_argument("--batch-size", type=int, default=8, help="tasks built before they are timed, both paths")
    parser.add_argument("--threads", type=int, default=None, help="timing threads (default: every usable core)")
    parser.add_argument("--nodes", default="1,8,64", help="cluster sizes of the estimate")
    args = parser.parse_args()
    threads, cores = use_threads(args.threads), len(os.sched_getaffinity(0))
    target = make_target(threads)
    (warm_up, *tasks), space_tasks = sample(args)
    print(f"{args.model}: {space_tasks} tasks in its space; {len(tasks)} sampled (seed {args.seed}); {cores} cores, "
          f"{threads} timing threads, batches of {args.batch_size}", flush=True)

    from ray.cluster_utils import Cluster as LocalCluster

    head = LocalCluster(initialize_head=True, head_node_args={"num_cpus": cores, "resources": {TIMING_SLOT: 1},
                                                                "include_dashboard": False})
    local, remote = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="tessera-overhead-") as scratch:
            for index in range(args.rounds):
                with MeasuredCosts(CostCache(Path(scratch) / f"local{index}.sqlite"), target=target, threads=threads,
                                   builders=cores, batch_size=args.batch_size) as provider:
                    local.append(seconds_per_task(provider, warm_up, tasks))
                with ClusterCosts(CostCache(Path(scratch) / f"cluster{index}.sqlite"), target=target, threads=threads,
                                  cluster=Cluster(head.address), batch_size=args.batch_size) as provider:
                    remote.append(seconds_per_task(provider, warm_up, tasks))
                print(f"round {index + 1}: local {local[-1]:.3f} s per task, cluster {remote[-1]:.3f} s per task",
                      flush=True)
    finally:
        head.shutdown()
    builds, timings = phases(tasks, str(target), RunSettings(threads))
    task_time = statistics.median(b + t for b, t in zip(builds, timings))
    local_s, remote_s = statistics.median(local), statistics.median(remote)
    overhead = remote_s - local_s
    print(f"per task: local {local_s:.3f} s, cluster {remote_s:.3f} s; median task (build + timing) {task_time:.3f} s "
          f"(build {statistics.median(builds):.3f} s, timing {statistics.median(timings):.3f} s)")
    print(f"scheduling and transfer: {overhead * 1e3:+.1f} ms per task = {100 * overhead / task_time:+.2f}% of the "
          f"median task time, {100 * overhead / local_s:+.2f}% of the local time per task (goal: under 5%)")

    build, timing = statistics.mean(builds), statistics.mean(timings)
    per_node_task = build / cores + timing + max(overhead, 0.0)
    print(f"estimate for {args.model}'s {space_tasks} tasks, nodes of {cores} cores: a node spends mean build "
          f"{build:.3f} s / {cores} + mean timing {timing:.3f} s + overhead {max(overhead, 0.0) * 1e3:.1f} ms = "
          f"{per_node_task:.3f} s per task")
    for nodes in (int(n) for n in args.nodes.split(",")):
        wall = space_tasks * per_node_task / nodes
        overlapped = space_tasks * max(build / (nodes * cores), timing / nodes)
        print(f"  {nodes:>3} nodes: {wall / 60:7.1f} min (builds and timings overlapped on each node: at best "
              f"{overlapped / 60:.1f} min)")


if __name__ == "__main__":
    main()
