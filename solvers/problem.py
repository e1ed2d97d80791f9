"""The node/edge cost problem that every solver takes, and its JSON format.

Each node picks exactly one of its candidates. A node has a cost per candidate and an edge ``(src, dst)`` has a
cost matrix ``costs[i][j]`` for src taking candidate ``i`` and dst candidate ``j``. A cost of ``inf`` (``null`` in
JSON) forbids that candidate or pair. The objective is the sum of the chosen node costs and edge entries.

Edges given more than once between the same two nodes (in either direction) are merged by adding their matrices,
which leaves the cost of every assignment unchanged; the merged edge keeps the direction it was first given in.

The largest finite costs of the nodes and edges may sum to ``COST_LIMIT`` at most: then no sum a solver forms (an
assignment's cost, a reduction, a table of partial sums) can overflow a float.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from solvers.input_files import InputFileError, read_text

COST_LIMIT = 1e300
"""The largest sum of the nodes' and edges' largest finite costs a problem may have (a float holds up to 1.8e308)."""


class ProblemError(ValueError):
    """A problem, or an assignment for it, is malformed."""


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _cost_array(values: Any, shape: tuple[int, ...], where: str) -> np.ndarray:
    """Convert nested lists of numbers/None (or an array) into a float array; None means forbidden (inf)."""
    if isinstance(values, np.ndarray):
        array = values.astype(float, copy=True)
    else:
        try:
            array = np.array(values, dtype=object)
        except ValueError as exc:  # ragged nesting
            raise ProblemError(f"{where}: costs must be a regular {'x'.join(map(str, shape))} array") from exc
        if array.shape != shape:
            raise ProblemError(f"{where}: costs have shape {_shape(array.shape)}, expected {_shape(shape)}")
        flat = []
        for value in array.reshape(-1):
            if value is None:
                flat.append(math.inf)
            elif isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ProblemError(f"{where}: cost {value!r} is not a number or null")
            else:
                flat.append(float(value))
        array = np.array(flat, dtype=float).reshape(shape)
    if array.shape != shape:
        raise ProblemError(f"{where}: costs have shape {_shape(array.shape)}, expected {_shape(shape)}")
    if np.isnan(array).any():
        raise ProblemError(f"{where}: costs contain NaN")
    if (array < 0).any():
        raise ProblemError(f"{where}: costs must be non-negative, found {array[array < 0].min():g}")
    if np.isneginf(array).any():
        raise ProblemError(f"{where}: costs contain -inf")
    return _readonly(array)


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


@dataclass(frozen=True, eq=False)
class Node:
    """One decision: pick one of ``candidates``, paying ``costs[i]`` (inf forbids candidate ``i``)."""

    name: str
    candidates: tuple[str, ...]
    costs: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProblemError(f"node name {self.name!r} must be a non-empty string")
        candidates = tuple(self.candidates)
        if not candidates:
            raise ProblemError(f"node {self.name!r}: has no candidates")
        if not all(isinstance(c, str) for c in candidates):
            raise ProblemError(f"node {self.name!r}: candidate names must be strings")
        if len(set(candidates)) != len(candidates):
            dup = next(c for c in candidates if candidates.count(c) > 1)
            raise ProblemError(f"node {self.name!r}: candidate {dup!r} appears twice")
        costs = _cost_array(self.costs, (len(candidates),), f"node {self.name!r}")
        if np.isinf(costs).all():
            raise ProblemError(f"node {self.name!r}: every candidate is forbidden")
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "costs", costs)


@dataclass(frozen=True, eq=False)
class Edge:
    """A pairwise cost ``costs[i, j]`` for ``src`` taking candidate ``i`` and ``dst`` candidate ``j``."""

    src: str
    dst: str
    costs: np.ndarray


@dataclass(frozen=True, eq=False)
class Problem:
    """A validated node/edge cost problem.

    Build it from nodes and edges (``Problem.build``), from the JSON dictionary (``Problem.from_dict``) or from a
    file (``Problem.load``). Duplicate edges are merged; self-loops, unknown nodes and bad shapes are rejected.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])],
    ...                   [("a", "b", [[0, 5], [5, 0]])])
    >>> p.evaluate({"a": "x", "b": "y"})
    7.0
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ProblemError("a problem needs at least one node")
        index: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if node.name in index:
                raise ProblemError(f"duplicate node name {node.name!r}")
            index[node.name] = i
        merged: dict[tuple[int, int], np.ndarray] = {}
        first_seen: dict[tuple[int, int], tuple[int, int]] = {}
        for edge in self.edges:
            for end in (edge.src, edge.dst):
                if end not in index:
                    raise ProblemError(f"edge {edge.src!r} -> {edge.dst!r}: unknown node {end!r}")
            if edge.src == edge.dst:
                raise ProblemError(f"edge {edge.src!r} -> {edge.dst!r}: self-loops are not allowed")
            u, v = index[edge.src], index[edge.dst]
            shape = (len(self.nodes[u].candidates), len(self.nodes[v].candidates))
            matrix = _cost_array(edge.costs, shape, f"edge {edge.src!r} -> {edge.dst!r}")
            key, matrix = ((u, v), matrix) if u < v else ((v, u), matrix.T)
            merged[key] = merged[key] + matrix if key in merged else matrix
            first_seen.setdefault(key, (u, v))
        edges = []
        for key, m in sorted(merged.items()):
            u, v = first_seen[key]
            oriented = m if (u, v) == key else m.T
            edges.append(Edge(self.nodes[u].name, self.nodes[v].name, _readonly(np.ascontiguousarray(oriented))))
        edges = tuple(edges)
        _check_cost_limit(self.nodes, edges)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "meta", dict(self.meta))
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_pairs", {key: _readonly(merged[key]) for key in sorted(merged)})

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        nodes: Sequence[tuple[str, Sequence[str], Any]],
        edges: Sequence[tuple[str, str, Any]] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> Problem:
        """Build from ``(name, candidates, costs)`` and ``(src, dst, matrix)`` tuples."""
        return cls(
            tuple(Node(name, tuple(cands), costs) for name, cands, costs in nodes),
            tuple(Edge(src, dst, costs) for src, dst, costs in edges),
            meta or {},
        )

    @classmethod
    def from_dict(cls, data: Any) -> Problem:
        """Build from the JSON dictionary form (see the module docstring and the README)."""
        if not isinstance(data, dict):
            raise ProblemError("problem must be a JSON object with 'nodes' and 'edges'")
        unknown = set(data) - {"nodes", "edges", "meta"}
        if unknown:
            raise ProblemError(f"unknown top-level key(s): {', '.join(sorted(unknown))}")
        raw_nodes, raw_edges = data.get("nodes"), data.get("edges", [])
        if not isinstance(raw_nodes, list) or not raw_nodes:
            raise ProblemError("'nodes' must be a non-empty list")
        if not isinstance(raw_edges, list):
            raise ProblemError("'edges' must be a list")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise ProblemError("'meta' must be an object")
        nodes = []
        for i, raw in enumerate(raw_nodes):
            _require_keys(raw, ("name", "candidates", "costs"), f"nodes[{i}]")
            if not isinstance(raw["candidates"], list):
                raise ProblemError(f"node {raw['name']!r}: 'candidates' must be a list")
            nodes.append(Node(raw["name"], tuple(raw["candidates"]), raw["costs"]))
        edges = []
        for i, raw in enumerate(raw_edges):
            _require_keys(raw, ("src", "dst", "costs"), f"edges[{i}]")
            edges.append(Edge(raw["src"], raw["dst"], raw["costs"]))
        return cls(tuple(nodes), tuple(edges), meta)

    @classmethod
    def load(cls, path: str | Path) -> Problem:
        """Read a problem JSON file; any fault raises ``ProblemError`` naming the file."""
        try:
            text = read_text(path)
        except OSError as exc:
            raise ProblemError(f"cannot read {path}: {exc.strerror}") from exc
        except InputFileError as exc:
            raise ProblemError(str(exc)) from exc
        except UnicodeDecodeError as exc:
            raise ProblemError(f"{path}: not UTF-8 text (byte {exc.start}); is it a problem file?") from exc
        try:
            return cls.from_dict(parse_json(text))
        except ProblemError as exc:
            raise ProblemError(f"{path}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """The JSON dictionary form; forbidden costs become ``None``."""
        return {
            "nodes": [
                {"name": n.name, "candidates": list(n.candidates), "costs": _to_json(n.costs)} for n in self.nodes
            ],
            "edges": [{"src": e.src, "dst": e.dst, "costs": _to_json(e.costs)} for e in self.edges],
            "meta": dict(self.meta),
        }

    def save(self, path: str | Path) -> None:
        """Write the problem as JSON (atomically: a temporary file renamed into place)."""
        write_json_atomic(path, self.to_dict())

    # ------------------------------------------------------------------ structure
    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def domain_sizes(self) -> tuple[int, ...]:
        return tuple(len(n.candidates) for n in self.nodes)

    def index(self, name: str) -> int:
        """Position of node ``name`` in ``nodes``."""
        try:
            return self._index[name]  # type: ignore[attr-defined]
        except KeyError:
            raise ProblemError(f"unknown node {name!r}") from None

    @property
    def pairs(self) -> Mapping[tuple[int, int], np.ndarray]:
        """Merged edge matrices keyed by node positions ``(u, v)`` with ``u < v``; rows index ``u``."""
        return self._pairs  # type: ignore[attr-defined]

    def neighbors(self) -> list[list[int]]:
        """Adjacency lists by node position."""
        adj: list[list[int]] = [[] for _ in self.nodes]
        for u, v in self.pairs:
            adj[u].append(v)
            adj[v].append(u)
        return adj

    # ------------------------------------------------------------------ assignments
    def to_indices(self, assignment: Mapping[str, str] | Sequence[int]) -> tuple[int, ...]:
        """Normalise an assignment (node -> candidate name, or candidate index per node) to indices."""
        if isinstance(assignment, Mapping):
            missing = [n.name for n in self.nodes if n.name not in assignment]
            if missing:
                raise ProblemError(f"assignment misses node(s): {', '.join(missing[:5])}")
            extra = set(assignment) - set(self._index)  # type: ignore[attr-defined]
            if extra:
                raise ProblemError(f"assignment names unknown node(s): {', '.join(sorted(extra)[:5])}")
            out = []
            for node in self.nodes:
                choice = assignment[node.name]
                if choice not in node.candidates:
                    raise ProblemError(f"node {node.name!r} has no candidate {choice!r}")
                out.append(node.candidates.index(choice))
            return tuple(out)
        indices = tuple(int(i) for i in assignment)
        if len(indices) != self.num_nodes:
            raise ProblemError(f"assignment has {len(indices)} entries for {self.num_nodes} nodes")
        for node, i in zip(self.nodes, indices):
            if not 0 <= i < len(node.candidates):
                raise ProblemError(f"node {node.name!r}: candidate index {i} out of range")
        return indices

    def to_names(self, indices: Sequence[int]) -> dict[str, str]:
        """Candidate index per node -> ``{node: candidate name}``."""
        return {node.name: node.candidates[i] for node, i in zip(self.nodes, self.to_indices(indices))}

    def forbidding(self, forbidden: Callable[[str, str], bool]) -> Problem:
        """This problem with candidate ``c`` of node ``n`` forbidden (cost inf) wherever ``forbidden(n, c)``: a
        restricted space solved on the same costs."""
        nodes = tuple(replace(node, costs=np.where([forbidden(node.name, c) for c in node.candidates], np.inf,
                                                   node.costs)) for node in self.nodes)
        return replace(self, nodes=nodes)

    def evaluate(self, assignment: Mapping[str, str] | Sequence[int]) -> float:
        """Total cost of an assignment; ``inf`` if it picks a forbidden candidate or pair."""
        x = self.to_indices(assignment)
        total = sum(float(node.costs[i]) for node, i in zip(self.nodes, x))
        total += sum(float(m[x[u], x[v]]) for (u, v), m in self.pairs.items())
        return total

    def violations(self, assignment: Mapping[str, str] | Sequence[int]) -> list[str]:
        """Human-readable list of the forbidden candidates and pairs an assignment picks."""
        x = self.to_indices(assignment)
        found = [
            f"node {n.name!r} candidate {n.candidates[i]!r} is forbidden"
            for n, i in zip(self.nodes, x)
            if math.isinf(n.costs[i])
        ]
        for (u, v), m in self.pairs.items():
            if math.isinf(m[x[u], x[v]]):
                a, b = self.nodes[u], self.nodes[v]
                found.append(
                    f"pair {a.name!r}={a.candidates[x[u]]!r}, {b.name!r}={b.candidates[x[v]]!r} is forbidden"
                )
        return found


def _check_cost_limit(nodes: Sequence[Node], edges: Sequence[Edge]) -> None:
    """Raise ``ProblemError`` when the largest finite costs of ``nodes`` and ``edges`` sum to more than
    ``COST_LIMIT``, naming the node or edge with the largest."""
    peaks = [float(np.max(a, where=np.isfinite(a), initial=0.0)) for a in (*(n.costs for n in nodes),
                                                                           *(e.costs for e in edges))]
    total = sum(peaks)  # inf past a float's range
    if total <= COST_LIMIT:
        return
    places = [f"node {n.name!r}" for n in nodes] + [f"edge {e.src!r} -> {e.dst!r}" for e in edges]
    top = int(np.argmax(peaks))
    amount = f"{total:.3g}" if math.isfinite(total) else "more than a float holds"
    raise ProblemError(f"costs too large: the largest finite costs of the nodes and edges sum to {amount}, above "
                       f"the limit of {COST_LIMIT:g} that keeps every sum of costs a finite float ({places[top]} "
                       f"alone {peaks[top]:.3g}); scale the costs down")


def parse_json(text: str) -> Any:
    """Standard JSON only: ``ProblemError`` for malformed text, ``NaN`` / ``Infinity`` (not JSON) and numbers too
    large for a float (``1e400``), which would otherwise read as infinite, i.e. forbidden, costs."""

    def constant(name: str) -> Any:
        raise ProblemError(f"{name} is not a JSON number; write null to forbid a candidate or pair")

    def number(literal: str) -> float | int:
        too_large = len(literal) > 400 or math.isinf(float(literal))  # 400 digits: far above a float's 1.8e308
        if too_large:
            raise ProblemError(f"number {literal[:24]}{'...' if len(literal) > 24 else ''} is too large for a float")
        return int(literal) if literal.lstrip("-").isdigit() else float(literal)

    try:
        return json.loads(text, parse_constant=constant, parse_float=number, parse_int=number)
    except json.JSONDecodeError as exc:
        raise ProblemError(f"not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def _require_keys(raw: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(raw, dict):
        raise ProblemError(f"{where} must be an object")
    missing = [k for k in keys if k not in raw]
    if missing:
        raise ProblemError(f"{where}: missing key(s) {', '.join(repr(k) for k in missing)}")


def _to_json(array: np.ndarray) -> Any:
    return np.where(np.isinf(array), None, array).tolist()


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented, standard JSON through a temporary file and a rename (see ``write_text_atomic``)."""
    write_text_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def write_text_atomic(path: str | Path, text: str, opener: Callable[..., IO[Any]] = open) -> None:
    """Write ``text`` to a temporary file beside ``path`` (opened with ``opener``, e.g. ``gzip.open``) and rename it
    into place, so readers never see half a file; on any failure the temporary file is removed and ``path`` is left
    as it was. A directory at ``path`` raises ``IsADirectoryError`` naming ``path``."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory; name the file to write", str(path))
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with opener(tmp, "wt") as stream:
            stream.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
