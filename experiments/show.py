"""``tessera show``: a picture of a plan, SVG or PNG.

``draw_plan(plan_or_artifact, out)`` draws the operator graph of a plan file, a directory holding ``plan.json`` (an
artifact from ``tessera export``, or ``tessera tune``'s output), with each node's chosen layouts (a colour per layout:
the box is the layout the node writes, its left stripe the layout it reads), its schedule knobs and its cost, and
marks the reads that need a layout transform in red (``experiments.plan_view`` says what is drawn). Costs come from
``problem`` or from a ``problem.json`` beside the plan (for an artifact, also in the directory above it, where
``tune`` leaves it); without one the picture shows layouts and schedules only and says so.

The operators are laid out top to bottom by topological generation; a long chain is wrapped into columns so that
densenet201's 300 nodes fit one legible page. Reads between consecutive generations of one column are arrows, the
others (DenseNet's concatenations of earlier outputs, a wrap into the next column) curves drawn faintly beside the
column.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.plan_view import PlanView, ViewEdge, ViewNode, plan_view
from search.errors import SearchError
from search.plan import Plan
from search.precision import INSTRUCTIONS, KNOB
from solvers.formats import read_problem
from solvers.input_files import read_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from search.graph import OpGraph

FORMATS = (".svg", ".png")
PROBLEM_FILE = "problem.json"
BOX_W, BOX_H, STRIPE_W = 2.4, 0.36, 0.12  # inches
SLOT_W, ROW_H, GUTTER, MARGIN, HEADER = BOX_W + 0.3, 0.58, 0.9, 0.4, 1.75
TARGET_ASPECT = 1.5  # width / height the column wrapping aims at
UNWRAPPED_ROWS = 40  # generations drawn in one column
MIN_WIDTH = 10.5  # inches: the header's width
PNG_DPI = 150
TRANSFORM_RED = "#d62728"
LAYOUT_COLOURS = {"NCHW": 0, "NHWC": 1, "NCHW4c": 9, "NCHW8c": 2, "NCHW16c": 4, "NCHW32c": 5, "NCHW64c": 8, "NC": 7}
"""Each layout's colour pair in matplotlib's tab20 (pair 3, red, is left to the transforms)."""
OTHER_COLOUR = 6


@dataclass(frozen=True)
class PlanDrawing:
    """What ``draw_plan`` wrote: the picture, its node and conversion counts, the problem its costs come from (None:
    no costs) and a note when a problem beside the plan was not used."""

    path: Path
    nodes: int
    conversions: int
    problem: Path | None
    note: str = ""


def draw_plan(source: str | Path, out: str | Path, problem: str | Path | None = None, *,
              graph: OpGraph | None = None, error: float | None = None) -> PlanDrawing:
    """Draw the plan ``source`` (a plan file or a directory with ``plan.json``) into ``out`` (``.svg`` or ``.png``).

    Parameters
    ----------
    problem : path, optional
        The cost problem pricing the plan (default: ``problem.json`` beside it, if that prices it).
    graph : OpGraph, optional
        The plan's operator graph (default: reloaded from the plan's ``model`` and ``args``).
    error : float, optional
        The exported plan's measured relative output error, named in the title (default: an artifact's manifest's).

    Raises
    ------
    SearchError
        A bad output name, a missing plan, a plan that does not fit its model, a given problem that does not price it.
    """
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise SearchError(f"{out}: the picture's name must end in {' or '.join(FORMATS)}")
    if out.is_dir():
        raise SearchError(f"{out} is a directory; name the picture file to write")
    plan_file = _plan_file(Path(source))
    plan = Plan.load(plan_file)
    problem_file = Path(problem) if problem is not None else _problem_beside(plan_file)
    if out.exists() and any(f is not None and f.exists() and out.samefile(f) for f in (plan_file, problem_file)):
        raise SearchError(f"{out} is an input file; write the picture to another file")
    priced = read_problem(problem_file) if problem_file is not None else None
    graph = graph if graph is not None else plan_graph(plan)
    note = ""
    try:
        view = plan_view(graph, plan, priced, costs_from=problem_file.name if problem_file else "")
    except SearchError as exc:
        if priced is None or problem is not None:  # a plan that does not fit its model, a given problem not fitting
            raise
        note, problem_file = f"{problem_file} not used: {exc}", None
        view = plan_view(graph, plan)
    error = error if error is not None else _checked_error(plan_file)
    render(view, out, note=note, error=error)
    return PlanDrawing(out, len(view.nodes), view.conversions, problem_file, note)


def plan_graph(plan: Plan) -> OpGraph:
    """The operator graph of the plan's model, loaded with the plan's recorded shape and seed."""
    from experiments.deploy import plan_network

    if not plan.model:
        raise SearchError("the plan names no model; draw it from Python with draw_plan(..., graph=...)")
    return plan_network(plan.model, plan)[0]


def _plan_file(source: Path) -> Path:
    if source.is_dir():
        if not (source / "plan.json").is_file():
            raise SearchError(f"{source} holds no plan.json; give a plan file or an artifact directory")
        return source / "plan.json"
    if not source.is_file():
        raise SearchError(f"{source}: no such plan file or artifact directory")
    return source


def _checked_error(plan_file: Path) -> float | None:
    """The relative error of the numerical check in the manifest beside an artifact's plan; None without one."""
    manifest = plan_file.parent / "manifest.json"
    try:
        return float(json.loads(read_text(manifest))["numerical_check"]["relative_error"])
    except (OSError, ValueError, KeyError, TypeError):  # ValueError: also not a regular file (InputFileError)
        return None


def _problem_beside(plan_file: Path) -> Path | None:
    """``problem.json`` beside the plan, or one directory up when the plan is an artifact's (tune's layout)."""
    places = [plan_file.parent]
    if (plan_file.parent / "manifest.json").is_file():
        places.append(plan_file.parent.parent)
    return next((place / PROBLEM_FILE for place in places if (place / PROBLEM_FILE).is_file()), None)


# ---------------------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class _Layout:
    """Box centres (inches, y up), each node's generation and column, and the page size."""

    centres: dict[str, tuple[float, float]]
    rank: dict[str, int]
    column: dict[str, int]
    width: float
    height: float


def layout(view: PlanView) -> _Layout:
    """Generations top to bottom, more than ``UNWRAPPED_ROWS`` of them wrapped into columns of equal height so that
    the page is about ``TARGET_ASPECT`` wide; the nodes of a generation side by side, ordered by where their
    producers are."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(node.name for node in view.nodes)
    graph.add_edges_from((edge.src, edge.dst) for edge in view.edges)
    order = {node.name: index for index, node in enumerate(view.nodes)}
    slot: dict[str, float] = {}

    def producers_then_order(name: str) -> tuple[float, int]:
        placed = [slot[p] for p in graph.predecessors(name) if p in slot]
        return (sum(placed) / len(placed) if placed else 0.0, order[name])

    generations = []
    for generation in nx.topological_generations(graph):  # each placed before the next is sorted
        generations.append(sorted(generation, key=producers_then_order))
        slot.update({name: index - (len(generation) - 1) / 2 for index, name in enumerate(generations[-1])})
    widest = max(len(generation) for generation in generations)
    column_w = widest * SLOT_W + GUTTER
    rows = len(generations)
    if rows > UNWRAPPED_ROWS:
        rows = max(UNWRAPPED_ROWS // 2, math.ceil(math.sqrt(rows * column_w / (TARGET_ASPECT * ROW_H))))
    columns = math.ceil(len(generations) / rows)
    rows = math.ceil(len(generations) / columns)  # the last column as full as the others
    centres, rank, column = {}, {}, {}
    for index, generation in enumerate(generations):
        col, row = divmod(index, rows)
        for name in generation:
            centres[name] = (MARGIN + col * column_w + widest * SLOT_W / 2 + slot[name] * SLOT_W,
                             MARGIN + (rows - 1 - row) * ROW_H + BOX_H / 2)
            rank[name], column[name] = index, col
    return _Layout(centres, rank, column, max(MIN_WIDTH, 2 * MARGIN + columns * column_w - GUTTER + 0.6),
                   2 * MARGIN + rows * ROW_H + HEADER)


# ---------------------------------------------------------------------------------------------------- drawing
def render(view: PlanView, out: str | Path, *, note: str = "", error: float | None = None) -> Path:
    """Draw ``view`` into ``out`` (its suffix says SVG or PNG), atomically: a temporary file beside it, renamed;
    ``error`` (the plan's measured output error) goes into the title. An SVG keeps its text as text, so a viewer
    finds a node by its name."""
    import matplotlib
    from matplotlib.figure import Figure

    out = Path(out)
    placed = layout(view)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig = Figure(figsize=(placed.width, placed.height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, placed.width)
        ax.set_ylim(0, placed.height)
        ax.axis("off")
        colours, knobs = layout_colours(view), knob_abbreviations(view)
        _draw_edges(ax, view, placed)
        for node in view.nodes:
            _draw_node(ax, node, placed.centres[node.name], colours, knobs)
        _draw_header(fig, ax, view, placed, colours, knobs, note, error)
        _save(fig, out)
    return out


def layout_colours(view: PlanView) -> dict[str, tuple[str, str]]:
    """Layout -> (light face colour, dark stripe colour) for the layouts the plan's operators use (never red, the
    transforms' colour)."""
    from matplotlib import colormaps

    pairs = colormaps["tab20"].colors  # dark, light, dark, light, ...
    used = {side for node in view.nodes if node.role == "tunable" for side in (node.in_layout, node.out_layout)}
    known = [name for name in LAYOUT_COLOURS if name in used] + sorted(used - set(LAYOUT_COLOURS))
    index = {name: 2 * LAYOUT_COLOURS.get(name, OTHER_COLOUR) for name in known}
    return {name: (pairs[i + 1], pairs[i]) for name, i in index.items()}


def knob_abbreviations(view: PlanView) -> dict[str, str]:
    """Knob name -> its initials (``reg_n`` -> ``rn``), or the name itself where two knobs share initials; the
    precision is written out (``_schedule_text``)."""
    names = sorted({key for node in view.nodes for key, _ in node.knobs if key != KNOB})
    short = {name: "".join(part[:1] for part in name.split("_")) for name in names}
    clashes = {s for s in short.values() if list(short.values()).count(s) > 1}
    return {name: name if s in clashes else s for name, s in short.items()}


def _schedule_text(node: ViewNode, knobs: dict[str, str]) -> str:
    layouts = node.out_layout if node.in_layout == node.out_layout else f"{node.in_layout}>{node.out_layout}"
    return " ".join([layouts, *(f"bf16 ({INSTRUCTIONS[value]})" if key == KNOB else f"{knobs[key]}={value}"
                                for key, value in node.knobs)])


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return "forbidden" if math.isinf(value) else f"{value:.3g} ms"


def _draw_node(ax: Axes, node: ViewNode, centre: tuple[float, float], colours: dict, knobs: dict) -> None:
    from matplotlib.patches import FancyBboxPatch, Rectangle

    x, y = centre[0] - BOX_W / 2, centre[1] - BOX_H / 2
    tunable = node.role == "tunable"
    face = colours[node.out_layout][0] if tunable else "white"
    ax.add_patch(FancyBboxPatch((x, y), BOX_W, BOX_H, boxstyle="round,pad=0,rounding_size=0.04", facecolor=face,
                                edgecolor="#444444" if tunable else "#999999", linewidth=0.6,
                                linestyle="-" if tunable else "--", zorder=3))
    if tunable:
        ax.add_patch(Rectangle((x, y), STRIPE_W, BOX_H, facecolor=colours[node.in_layout][1], edgecolor="none",
                               zorder=4))
    left = x + STRIPE_W + 0.05
    title = f"{node.name}  {node.about}".strip()
    ax.text(left, centre[1] + 0.075, title, fontsize=6.5, va="center", ha="left", zorder=5)
    if node.cost_ms is not None:
        ax.text(x + BOX_W - 0.05, centre[1] + 0.075, _ms(node.cost_ms), fontsize=6.5, va="center", ha="right",
                weight="bold", zorder=5)
    detail = _schedule_text(node, knobs) if tunable else node.out_layout
    ax.text(left, centre[1] - 0.085, detail, fontsize=6, va="center", ha="left", color="#222222", zorder=5)


def _draw_edges(ax: Axes, view: PlanView, placed: _Layout) -> None:
    """Arrows between consecutive generations of a column, curves beside the column for the other reads; a
    conversion in red, labelled on its first read, its other reads (of the converted copy) in faint red."""
    from matplotlib.patches import FancyArrowPatch

    labelled: set[tuple[str, str]] = set()
    for edge in sorted(view.edges, key=lambda e: e.transform):  # transforms on top
        near = placed.column[edge.src] == placed.column[edge.dst] and \
            placed.rank[edge.dst] - placed.rank[edge.src] == 1
        curve, label_at = _edge_path(edge, placed, near)
        first = edge.transform and (edge.value, edge.target_layout) not in labelled
        if first:
            style = {"color": TRANSFORM_RED, "linewidth": 1.1 if near else 0.7, "alpha": 1.0}
        elif edge.transform:  # a read of the converted copy
            style = {"color": TRANSFORM_RED, "linewidth": 0.7 if near else 0.35, "alpha": 0.6 if near else 0.2}
        else:
            style = {"color": "#555555", "linewidth": 0.7 if near else 0.35, "alpha": 1.0 if near else 0.25}
        ax.add_patch(FancyArrowPatch(path=curve, arrowstyle="-|>", mutation_scale=5, zorder=2, shrinkA=0, shrinkB=0,
                                     **style))
        if first:
            labelled.add((edge.value, edge.target_layout))
            ax.text(*label_at, _transform_text(edge, near), fontsize=5.5, color=TRANSFORM_RED, ha="left",
                    va="center", zorder=6, linespacing=1.1,
                    bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})


def _edge_path(edge: ViewEdge, placed: _Layout, near: bool):
    """The edge's path (an arrow down to the next generation, else a curve from the source's right side, bulging
    into the gutter) and where its label goes."""
    from matplotlib.path import Path as Curve

    (x1, y1), (x2, y2) = placed.centres[edge.src], placed.centres[edge.dst]
    if near:
        start, end = (x1, y1 - BOX_H / 2), (x2, y2 + BOX_H / 2)
        return Curve([start, end]), (0.7 * start[0] + 0.3 * end[0] + 0.06, 0.7 * start[1] + 0.3 * end[1])
    bend = min(GUTTER * 0.8, 0.12 + 0.02 * abs(placed.rank[edge.dst] - placed.rank[edge.src]))
    start = (x1 + BOX_W / 2, y1)
    if placed.column[edge.src] == placed.column[edge.dst]:
        end, controls = (x2 + BOX_W / 2, y2), [(start[0] + bend, y1), (x2 + BOX_W / 2 + bend, y2)]
    else:  # into a later column: from the right side to the left side
        end, controls = (x2 - BOX_W / 2, y2), [(start[0] + bend, y1), (x2 - BOX_W / 2 - bend, y2)]
    curve = Curve([start, *controls, end], [Curve.MOVETO, Curve.CURVE4, Curve.CURVE4, Curve.CURVE4])
    return curve, (start[0] + 0.04, y1 + 0.12)


def _transform_text(edge: ViewEdge, one_line: bool) -> str:
    """``NCHW>NCHW16c 0.012 ms x3 reads`` (on two lines beside a curve, where the gutter is narrow)."""
    details = " ".join(part for part in (_ms(edge.cost_ms), f"x{edge.shared_by} reads" if edge.shared_by > 1 else "")
                       if part)
    return f"{edge.source_layout}>{edge.target_layout}" + ((" " if one_line else "\n") + details if details else "")


def _draw_header(fig: Figure, ax: Axes, view: PlanView, placed: _Layout, colours: dict, knobs: dict,
                 note: str, error: float | None) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    tunable = sum(node.role == "tunable" for node in view.nodes)
    title = f"{view.model or 'plan'}: {tunable} tuned operators" + (f" ({view.bf16} in bf16)" if view.bf16 else "")
    title += f", {view.conversions} layout conversions"
    if error is not None:
        title += f"; output error {error:.1e} against fp32"
    if view.costs_from:
        title += f"; costs from {view.costs_from}, plan total {_ms(view.total_ms)}"
    top = placed.height - MARGIN
    ax.text(MARGIN, top, title, fontsize=12, weight="bold", va="top")
    lines = ["box colour: layout an operator writes; left stripe: layout it reads; dashed: fixed NCHW operators, "
             "inputs and outputs",
             "red: a read needing a layout transform (from>to, its cost, the reads sharing one conversion); faint "
             "curves: reads of values from further up or the previous column"]
    if knobs:
        lines.append("knobs: " + ", ".join(f"{short}: {name}" for name, short in knobs.items()))
    if view.costs_from:
        lines.append("node cost: kernel, fused followers and the conversions from or to fixed NCHW tensors that have "
                     "no cost of their own on the edge (ms)")
    else:
        lines.append("no cost problem (give --problem or keep problem.json beside the plan): layouts and schedules "
                     "only" + (f"; {note}" if note else ""))
    ax.text(MARGIN, top - 0.3, "\n".join(lines), fontsize=8, va="top", linespacing=1.5)
    handles = [Patch(facecolor=face, edgecolor=dark, linewidth=2, label=name) for name, (face, dark) in
               colours.items()]
    handles.append(Line2D([], [], color=TRANSFORM_RED, linewidth=1.2, label="layout transform"))
    below = top - 0.45 - 0.19 * len(lines)
    fig.legend(handles=handles, loc="upper left", ncol=len(handles), fontsize=8, frameon=False, borderaxespad=0,
               bbox_to_anchor=(MARGIN / placed.width, below / placed.height))


def _save(fig: Figure, out: Path) -> None:
    """Write ``fig`` through a temporary file beside ``out``, renamed into place (removed on failure)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        fig.savefig(tmp, format=out.suffix.lower()[1:], dpi=PNG_DPI)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)

