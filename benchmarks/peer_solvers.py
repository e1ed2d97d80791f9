"""Tessera's solvers next to two peers on the same problems: toulbar2 and CP-SAT out of the box.

Contenders: tessera's auto, dp, pbqp, ilp and greedy, each with the time limit; toulbar2 through tessera's registered
``toulbar2`` solver as a user would run toulbar2 itself (the whole problem, no reductions, no VAC: ``presolve=False,
vac=False``; costs scaled to integers with the rounding bound applied to its proven bound, its search stopped on the
wall clock); and a plain CP-SAT model (a boolean per candidate with exactly-one, a boolean per allowed edge pair tied
to its endpoints by row and column sums) with default parameters bar the time limit and one worker per usable core, on
the same integer costs (``solvers/scaling.py``). ``--solvers`` runs a subset of these contenders.

Instances: a 1000-node chain, the SSD-like and DenseNet-201-like problems, a random 200-node DAG (each node reads 1 to
3 earlier ones) and the DenseNet-BC-like problem of the second generator (``solvers/dense_blocks.py``), with 5 and 10
candidates (seed 0), plus ``--problems``: files in any format ``solvers.formats`` reads (``.json``, ``.wcsp``, ``.cfn``,
``.uai``, optionally compressed) or folders of them, and with ``--public`` a few pairwise instances of toulbar2's
repository (``PUBLIC``: radio-link frequency assignment, CELAR; warehouse location; protein design; a random
weighted CSP; graph colouring), downloaded once into ``--work`` (never committed). Each instance gets ``--repeats``
rounds; in a round the contenders run in turn, in reversed order on every other round (and instance) so that drift of
the machine spreads evenly. A markdown table per instance gives the worst cost and weakest proven lower bound over the
rounds, the gap to the best lower bound of the instance (proven bounds and optima), the status (with counts when
rounds differ), the median seconds with min..max, and for the peers their median seconds over those of tessera's
fastest solver that proved optimality in every round (> 1: tessera is faster; ">" marks a peer that did not prove
optimality in every round).

    python benchmarks/peer_solvers.py [--quick] [--solvers auto,dp,pbqp,ilp,greedy,toulbar2,cp-sat]
                                      [--instances chain,ssd,densenet,random,blocks] [--candidates 5,10]
                                      [--problems FILE_OR_FOLDER ...] [--public] [--work DIR] [--time-limit 60]
                                      [--repeats 5] [--out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and the file solvers.py would shadow the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse  # noqa: E402
import datetime  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from functools import partial  # noqa: E402
from importlib.metadata import version  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import ortools  # noqa: E402
from ortools.sat.python import cp_model  # noqa: E402

from search.host import host  # noqa: E402
from solvers import Problem, ProblemError, SolverError, solve  # noqa: E402
from solvers.base import relative_gap  # noqa: E402
from solvers.formats import FORMATS, format_of, read_problem  # noqa: E402
from solvers.generators import generate  # noqa: E402
from solvers.scaling import scale_costs  # noqa: E402

INSTANCES = {
    "chain": ("chain-1000", {"nodes": 1000}),
    "ssd": ("ssd-like", {}),
    "densenet": ("densenet201-like", {}),
    "random": ("random-200", {"nodes": 200}),
    "blocks": ("densenet-bc-like", {}),
}
TESSERA = ("auto", "dp", "pbqp", "ilp", "greedy")
PUBLIC_COMMIT = "3fd36f6ff7cebfcc58b49f89334ffa971dcbf9a8"
PUBLIC = (
    "cover/CELAR6-SUB0.wcsp",  # radio-link frequency assignment (CELAR), 16 variables, domains of 36-44
    "cover/CELAR6-SUB1.wcsp",
    "cover/CELAR7-SUB0.wcsp",
    "validation/default/celar6sub0.wcsp",  # the same sub-problem encoded with 32 variables
    "web/TUTORIALS/CELAR6SUB1.cfn.gz",  # CELAR6-SUB1 as a cost function network (.cfn)
    "validation/default/cap131.wcsp",  # warehouse location (OR-Library cap131): 100 variables, 2500 functions
    "validation/default/1aho.cfn.gz",  # computational protein design, decimal costs
    "validation/default/example.wcsp",  # a random weighted CSP, 25 variables
    "web/EXAMPLES/GEOM40_6.wcsp.xz",  # geometric graph colouring
)
"""Pairwise instances of toulbar2's repository (github.com/toulbar2/toulbar2 at ``PUBLIC_COMMIT``), by path."""
WORKERS = len(os.sched_getaffinity(0))


MARK = "<!-- solvers: written by benchmarks/peer_solvers.py -->"


@dataclass(frozen=True)
class Result:
    """One contender on one instance; ``bound`` is a proven lower bound (the cost itself when proven optimal)."""

    solver: str
    cost: float | None
    bound: float | None
    status: str
    seconds: float


@dataclass(frozen=True)
class Summary:
    """One contender's rounds on one instance: worst cost, weakest bound, status (counted when rounds differ) and
    median, min and max seconds."""

    solver: str
    cost: float | None
    bound: float | None
    status: str
    optimal: bool
    seconds: float
    fastest: float
    slowest: float

    @classmethod
    def of(cls, rounds: Sequence[Result]) -> Summary:
        costs = [r.cost for r in rounds]
        bounds = [r.bound for r in rounds]
        counts = Counter(r.status for r in rounds)
        status = rounds[0].status if len(counts) == 1 else ", ".join(f"{n}x {s}" for s, n in counts.most_common())
        seconds = [r.seconds for r in rounds]
        return cls(
            rounds[0].solver,
            None if None in costs else max(costs),
            None if None in bounds else min(bounds),
            status,
            set(counts) == {"optimal"},
            statistics.median(seconds),
            min(seconds),
            max(seconds),
        )


def tessera(name: str, problem: Problem, time_limit: float, **params: Any) -> Result:
    """Tessera's solver ``name``; a refusal (``SolverError``) becomes the status, its message goes to stderr."""
    start = time.perf_counter()
    try:
        sol = solve(problem, name, time_limit=time_limit, **params)
    except SolverError as exc:
        print(f"  {exc}", file=sys.stderr)
        reason = str(exc).removeprefix(f"{name}: ").split(":")[0]
        return Result(name, None, None, f"refused ({reason})", time.perf_counter() - start)
    cost = None if math.isinf(sol.cost) else sol.cost
    return Result(name, cost, cost if sol.optimal else sol.lower_bound, sol.status, sol.seconds)


def toulbar2(problem: Problem, time_limit: float) -> Result:
    """toulbar2 as its users run it, through tessera's ``toulbar2`` solver (no reductions, no VAC)."""
    result = tessera("toulbar2", problem, time_limit, presolve=False, vac=False)
    return Result("toulbar2", result.cost, result.bound, result.status, result.seconds)


def cpsat(problem: Problem, time_limit: float) -> Result:
    """The local-polytope model in CP-SAT with default parameters (bar the time limit and the worker count)."""
    start = time.perf_counter()
    costs = scale_costs(problem, solver="cp-sat")
    model = cp_model.CpModel()
    allowed = [np.flatnonzero(np.isfinite(c)).tolist() for c in costs.nodes]
    x = {(u, i): model.new_bool_var(f"x{u}_{i}") for u, cands in enumerate(allowed) for i in cands}
    terms = [(var, int(costs.nodes[u][i])) for (u, i), var in x.items()]
    for u, cands in enumerate(allowed):
        model.add_exactly_one(x[u, i] for i in cands)
    for (u, v), matrix in costs.pairs.items():
        rows: dict[int, list[cp_model.IntVar]] = {i: [] for i in allowed[u]}
        cols: dict[int, list[cp_model.IntVar]] = {j: [] for j in allowed[v]}
        for i, j in zip(*np.nonzero(np.isfinite(matrix))):
            if i in rows and j in cols:
                y = model.new_bool_var(f"y{u}_{v}_{i}_{j}")
                rows[i].append(y)
                cols[j].append(y)
                terms.append((y, int(matrix[i, j])))
        for i, ys in rows.items():  # the pairs of a row sum to its candidate: picked pairs are allowed and agree
            model.add(cp_model.LinearExpr.sum(ys) == x[u, i])
        for j, ys in cols.items():
            model.add(cp_model.LinearExpr.sum(ys) == x[v, j])
    model.minimize(cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [c for _, c in terms]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = WORKERS
    status = solver.solve(model)
    seconds = time.perf_counter() - start
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Result("cp-sat", None, None, "infeasible" if status == cp_model.INFEASIBLE else "not_found", seconds)
    chosen = [next(i for i in cands if solver.boolean_value(x[u, i])) for u, cands in enumerate(allowed)]
    cost = problem.evaluate(chosen)
    exact = status == cp_model.OPTIMAL and costs.error == 0
    bound = cost if exact else costs.lower_bound(solver.best_objective_bound, cost)
    return Result("cp-sat", cost, bound, "optimal" if status == cp_model.OPTIMAL else "feasible", seconds)


CONTENDERS: dict[str, Callable[[Problem, float], Result]] = {name: partial(tessera, name) for name in TESSERA}
CONTENDERS |= {"toulbar2": toulbar2, "cp-sat": cpsat}


def run(
    label: str,
    problem: Problem,
    *,
    time_limit: float,
    repeats: int,
    first: int,
    contenders: Sequence[str] = tuple(CONTENDERS),
) -> tuple[str, dict[str, Summary]]:
    """Each of ``contenders`` (names of ``CONTENDERS``) ``repeats`` times on one problem, reversing the order from
    round ``first`` on every other round: a markdown section and the summaries; progress goes to stderr."""
    print(f"{label}: {problem.num_nodes} nodes, {len(problem.edges)} edges", file=sys.stderr, flush=True)
    costs = scale_costs(problem, solver="cp-sat")
    rounds: dict[str, list[Result]] = {name: [] for name in contenders}
    for r in range(repeats):
        for name in reversed(contenders) if (first + r) % 2 else contenders:
            result = CONTENDERS[name](problem, time_limit)
            rounds[name].append(result)
            print(f"  round {r + 1}/{repeats} {name}: {result.status} in {result.seconds:.2f} s", file=sys.stderr,
                  flush=True)
    summaries = {name: Summary.of(results) for name, results in rounds.items()}
    rows = list(summaries.values())
    best = max((r.bound for r in rows if r.bound is not None), default=None)
    proofs = [r for r in rows if r.solver in TESSERA and r.optimal]
    ref = min(proofs, key=lambda r: r.seconds, default=None)
    against = f"peer median seconds over tessera's {ref.solver}" if ref else "no tessera solver proved optimality"
    lines = [
        f"### {label}",
        "",
        f"{problem.num_nodes} nodes, {len(problem.edges)} edges; {repeats} round(s); peers' costs scaled by "
        f"{costs.scale:g} (rounding error bound {costs.error:.3g}); vs tessera: {against}.",
        "",
        "| solver | cost | bound | gap | status | median s | min..max s | vs tessera |",
        "|---|--:|--:|--:|---|--:|--:|--:|",
    ]
    for r in rows:
        gap = None if r.cost is None or best is None else relative_gap(r.cost, best)
        ratio = "-" if ref is None or r.solver in TESSERA else f"{r.seconds / max(ref.seconds, 1e-9):.2f}"
        ratio = ratio if ratio == "-" or r.optimal else f">{ratio}"
        lines.append(
            f"| {r.solver} | {_number(r.cost)} | {_number(r.bound)} | {'-' if gap is None else f'{100 * gap:.3f}%'} "
            f"| {r.status} | {r.seconds:.3f} | {r.fastest:.3f}..{r.slowest:.3f} | {ratio} |"
        )
    wrong = [r.solver for r in rows if r.cost is not None and best is not None and r.cost < best - 1e-6 * abs(best)]
    if wrong:
        lines += ["", f"**Inconsistent:** {', '.join(wrong)} found a cost below the best proven lower bound."]
    return "\n".join(lines), summaries


def problem_files(path: Path) -> list[Path]:
    """``path`` itself, or the problem files in the folder ``path`` (those whose suffix ``solvers.formats`` knows),
    sorted by name."""
    if not path.is_dir():
        return [path]
    found = []
    for child in sorted(path.iterdir()):
        try:
            format_of(child)
        except ProblemError:
            continue
        found.append(child)
    return found


def download_public(folder: Path) -> list[Path]:
    """The ``PUBLIC`` instances in ``folder``, each downloaded from toulbar2's repository unless already there."""
    import urllib.request

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in PUBLIC:
        path = folder / Path(name).name
        if not path.exists():
            url = f"https://raw.githubusercontent.com/toulbar2/toulbar2/{PUBLIC_COMMIT}/{name}"
            print(f"downloading {url}", file=sys.stderr, flush=True)
            tmp = path.with_name(f".{path.name}.tmp")
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    tmp.write_bytes(response.read())
                tmp.replace(path)
            finally:
                tmp.unlink(missing_ok=True)
        paths.append(path)
    return paths


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="k = 5 only and 5 s limits (a smoke run)")
    parser.add_argument("--solvers", default=",".join(CONTENDERS),
                        help=f"comma-separated contenders: {', '.join(CONTENDERS)} (default: all)")
    parser.add_argument("--instances", default=",".join(INSTANCES),
                        help=f"comma-separated generated instances: {', '.join(INSTANCES)} (empty: none)")
    parser.add_argument("--candidates", default=None, help="comma-separated candidate counts (default: 5,10)")
    parser.add_argument("--problems", nargs="*", default=[],
                        help=f"problem files ({', '.join(FORMATS)}, optionally .gz/.xz/.bz2) or folders of them")
    parser.add_argument("--public", action="store_true",
                        help="add the pairwise instances of toulbar2's repository listed in PUBLIC (downloaded once)")
    parser.add_argument("--work", type=Path, default=Path("peer-solvers-work"),
                        help="folder for downloaded instances (default: peer-solvers-work/)")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per solver run (default: 60)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds per instance (default: 5; --quick: 1)")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--results", type=Path, help="markdown file whose solver section gets the report")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default: sqlite:///mlflow.db here)")
    args = parser.parse_args(argv)
    contenders = list(dict.fromkeys(name.strip() for name in args.solvers.split(",") if name.strip()))
    unknown = [name for name in contenders if name not in CONTENDERS]
    if unknown or not contenders:
        what = f"unknown contender(s) {', '.join(unknown)}" if unknown else "no contender given"
        parser.error(f"--solvers: {what}; choose from {', '.join(CONTENDERS)}")
    instances = [name.strip() for name in args.instances.split(",") if name.strip()]
    unknown = [name for name in instances if name not in INSTANCES]
    if unknown:
        parser.error(f"unknown instance(s) {', '.join(unknown)}; choose from {', '.join(INSTANCES)}")
    try:
        candidates = [int(k) for k in (args.candidates or ("5" if args.quick else "5,10")).split(",")]
    except ValueError:
        parser.error(f"--candidates must be comma-separated integers, got {args.candidates!r}")
    time_limit = args.time_limit if args.time_limit is not None else 5.0 if args.quick else 60.0
    repeats = args.repeats if args.repeats is not None else 1 if args.quick else 5
    if repeats < 1:
        parser.error(f"--repeats must be at least 1, got {repeats}")
    paths = [path for given in args.problems for path in problem_files(Path(given))]
    try:
        if args.public:
            paths += download_public(args.work / "public")
        files = [(path.name, read_problem(path)) for path in paths]
    except (ProblemError, OSError) as exc:
        parser.error(str(exc))

    problems = [(f"{INSTANCES[kind][0]} k={k}", kind, k) for kind in instances for k in candidates]
    report = [
        "# Tessera against toulbar2 and CP-SAT",
        "",
        "`" + " ".join(["python benchmarks/peer_solvers.py", *(sys.argv[1:] if argv is None else argv)]) + "`",
        "",
        f"{datetime.datetime.now().isoformat(timespec='seconds')} on {host().cpu}, {WORKERS} usable core(s) "
        f"(CP-SAT workers); tessera {version('tessera')}, ortools {ortools.__version__}, "
        f"pytoulbar2 {version('pytoulbar2')}; "
        f"time limit {time_limit:g} s per run, {repeats} round(s) per instance. "
        "Gap: (cost - best lower bound of the instance) / cost.",
    ]
    instances = [(label, generate(kind, seed=0, candidates=k, **INSTANCES[kind][1])) for label, kind, k in problems]
    logged = []
    for n, (label, problem) in enumerate(instances + files):
        section, results = run(label, problem, time_limit=time_limit, repeats=repeats, first=n, contenders=contenders)
        report += ["", section]
        logged.append((label, problem, results))
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    if args.results:
        from experiments.report import replace_section

        replace_section(args.results, MARK, ["## " + report[0][2:], *report[1:]], "Benchmarks against peers")
    from experiments.tracking import log_benchmark_run

    for label, problem, results in logged:
        metrics = {f"{name}_{field}": getattr(r, field) for name, r in results.items()
                   for field in ("cost", "bound", "seconds", "fastest", "slowest")}
        metrics.update({f"{name}_optimal": float(r.optimal) for name, r in results.items()})
        params = {"instance": label, "nodes": problem.num_nodes, "edges": len(problem.edges), "time_limit": time_limit,
                  "repeats": repeats}
        log_benchmark_run("peers", f"solvers {label}", params, metrics,
                          {name: r.__dict__ for name, r in results.items()}, args.tracking_uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
