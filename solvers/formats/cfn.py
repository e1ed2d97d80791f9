"""toulbar2's ``.cfn`` format: a JSON-like object ``{problem: {name, mustbe}, variables: {...}, functions: {...}}``
with named variables and values and decimal, possibly negative, costs, read as toulbar2 reads it (quotes, colons and
commas are separators; tags may be left out; ``#`` comment lines and ``//`` comments).

Reading: ``mustbe: "<UB"`` minimises and ``">LB"`` maximises (costs negated, ``meta["objective"]`` is
``"maximize"``); ``inf`` is forbidden, and so is an entry that takes every assignment using it to the bound; dense and
sparse (``defaultcost``) tables and shared tables (``costs: other_function``) are supported; global cost functions
(``type: ...``), interval variables and functions of three or more variables are refused with their name. Writing:
names are kept (a character that toulbar2 would split on, and ``%``, written as ``%XX``), costs as shortest exact
decimals, forbidden entries as ``inf`` (toulbar2's hard cost), ``meta["offset"]`` as a constant function.
"""

from __future__ import annotations

import math
import re

import numpy as np

from solvers.formats.tables import EntryBudget, Tables, functions_of, hard_cost
from solvers.formats.tokens import Tokens
from solvers.problem import Problem

OPEN, CLOSE = ("{", "["), ("}", "]")
_SPECIAL = re.compile(r'[\s":,{}\[\]#/%]|^[-+.0-9]')
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def read_cfn(text: str) -> Problem:
    """Parse ``.cfn`` text into a ``Problem`` (see the module docstring)."""
    tokens = Tokens.cfn(text)
    _open(tokens, "the file")
    first = tokens.take("'problem' or '{'")
    json_mode = first == "problem"
    if json_mode:
        first = tokens.take("'{'")
    if first not in OPEN:
        raise tokens.error(f"expected '{{' to open the problem, got {first!r}")
    _tag(tokens, json_mode, "name")
    name = _unescape(tokens.take("the problem name"))
    _tag(tokens, json_mode, "mustbe")
    bound_text = tokens.take("the bound (mustbe)")
    if bound_text[:1] not in ("<", ">") or not _is_cost(bound_text[1:]):
        raise tokens.error(f"mustbe must be '<' or '>' and a number, got {bound_text!r}")
    maximize = bound_text[0] == ">"
    _close(tokens, "the problem")
    budget = EntryBudget(tokens.error)
    names, values = _variables(tokens, json_mode, budget)
    meta = {"format": "cfn", "name": name, "objective": "maximize" if maximize else "minimize",
            "mustbe": bound_text}
    tables = Tables(names, values, meta)
    sign = -1.0 if maximize else 1.0
    for label, scope, table in _functions(tokens, json_mode, names, values, budget):
        tables.add(label, scope, sign * table)
    if tokens.peek() is not None:  # toulbar2 does not require the file's closing brace, nor do we
        _close(tokens, "the file")
    tokens.end()
    return tables.problem(sign * float(bound_text[1:]))


def write_cfn(problem: Problem) -> str:
    """``problem`` as ``.cfn`` text (see the module docstring)."""
    offset = float(problem.meta.get("offset", 0.0)) if _is_real(problem.meta.get("offset")) else 0.0
    bound = hard_cost(problem, abs(offset))  # above every finite total, whatever the (negative) offset
    texts = [_decimal(bound)] + [_decimal(c) for a in _arrays(problem) for c in a[np.isfinite(a)]]
    decimals = max(len(t.partition(".")[2]) for t in texts)
    bound_text = f"{bound:.{decimals}f}"
    names = [_escape(node.name) for node in problem.nodes]
    lines = [f'{{"problem": {{"name": "{_escape(str(problem.meta.get("name") or "tessera"))}", '
             f'"mustbe": "<{bound_text}"}},', ' "variables": {']
    lines += [f'  "{name}": [{", ".join(f"{chr(34)}{_escape(c)}{chr(34)}" for c in node.candidates)}]'
              + ("," if u + 1 < problem.num_nodes else "") for u, (name, node) in enumerate(zip(names, problem.nodes))]
    lines.append(" },")
    functions = [("offset", [], [offset])] if offset else []
    functions += [(f"f{n}", [names[u] for u in scope], table) for n, (scope, table) in enumerate(functions_of(problem))]
    lines.append(' "functions": {')
    for n, (label, scope, table) in enumerate(functions):
        costs = ", ".join("inf" if np.isinf(c) else _decimal(c) for c in table)
        comma = "," if n + 1 < len(functions) else ""
        lines.append(f'  "{label}": {{"scope": [{", ".join(f"{chr(34)}{v}{chr(34)}" for v in scope)}], '
                     f'"costs": [{costs}]}}{comma}')
    lines.append(" }")
    return "\n".join(lines) + "\n}\n"


# ---------------------------------------------------------------------------------------------------- reading
def _variables(tokens: Tokens, json_mode: bool, budget: EntryBudget) -> tuple[list[str], list[list[str]]]:
    _tag(tokens, json_mode, "variables")
    _open(tokens, "the variables")
    names: list[str] = []
    values: list[list[str]] = []
    while (token := tokens.take("a variable or '}'")) not in CLOSE:
        if token in OPEN or token[0].isdigit() or token[0] == "-":
            name = f"x{len(names)}"
        else:
            name, token = _unescape(token), tokens.take(f"the domain of variable {token}")
        if name in names:
            raise tokens.error(f"variable {name!r} appears twice")
        if token in OPEN:
            domain = []
            while (value := tokens.take(f"a value of {name} or ']'")) not in CLOSE:
                domain.append(_unescape(value))
            if not domain or len(set(domain)) != len(domain):
                raise tokens.error(f"variable {name!r}: its domain is empty or names a value twice")
        else:
            try:
                size = int(token)
            except ValueError:
                raise tokens.error(f"variable {name!r}: expected a domain or its size, got {token!r}") from None
            if size <= 0:
                raise tokens.error(f"variable {name!r} has domain size {size}: interval variables are not supported")
            budget.take(size, f"variable {name!r}")
            domain = [f"v{j}" for j in range(size)]
        names.append(name)
        values.append(domain)
    if not names:
        raise tokens.error("the problem has no variable")
    return names, values


def _functions(
    tokens: Tokens, json_mode: bool, names: list[str], values: list[list[str]], budget: EntryBudget
) -> list[tuple[str, list[int], np.ndarray]]:
    """Every cost function as ``(label, scope, table)``, shared tables resolved."""
    _tag(tokens, json_mode, "functions")
    _open(tokens, "the functions")
    index = {name: i for i, name in enumerate(names)}
    read: list[tuple[str | None, str, list[int], np.ndarray | str]] = []
    while (token := tokens.take("a function or '}'")) not in CLOSE:
        line = tokens.line
        if token in OPEN:
            name = None
        else:
            name = _unescape(token)
            _open(tokens, f"function {name}")
        _tag(tokens, json_mode, "scope")
        _open(tokens, f"the scope of function {name or len(read)}")
        scope = []
        while (variable := tokens.take("a variable or ']'")) not in CLOSE:
            position = _variable(variable, index)
            if position is None:
                raise tokens.error(f"function {name or len(read)}: unknown variable {variable!r}")
            scope.append(position)
        label = name or f"f({','.join(names[i] for i in scope)})"
        label = f"{label} (line {line})"
        shape = tuple(len(values[i]) for i in scope)
        token = tokens.take(f"the costs of function {label}")
        default = None
        if (json_mode and token == "defaultcost") or (not json_mode and _is_cost(token)):
            default = _cost(tokens, tokens.take("the default cost") if json_mode else token, label)
            token = tokens.take(f"the costs of function {label}")
        if json_mode and token == "type" or not json_mode and token not in OPEN and tokens.peek() in OPEN:
            raise tokens.error(f"function {label} is a global cost function: only cost tables are supported")
        if json_mode:
            if token != "costs":
                raise tokens.error(f"function {label}: expected 'costs', got {token!r}")
            token = tokens.take(f"the costs of function {label}")
        if token in OPEN:
            read.append((name, label, scope, _table(tokens, label, shape, default, [values[i] for i in scope],
                                                    budget)))
        else:
            if default is not None:
                raise tokens.error(f"function {label} shares a table and cannot have a default cost")
            read.append((name, label, scope, _unescape(token)))
        _close(tokens, f"function {label}")
    tables = {name: table for name, _, _, table in read if name is not None and not isinstance(table, str)}
    out = []
    for _, label, scope, table in read:
        if isinstance(table, str):  # shares the table of a function defined elsewhere in the file
            shape = tuple(len(values[i]) for i in scope)
            if table not in tables or tables[table].shape != shape:
                raise tokens.error(f"function {label} shares the table of {table!r}, which is not a table of its "
                                   "shape")
            table = tables[table]
        out.append((label, scope, table))
    return out


def _table(tokens: Tokens, label: str, shape: tuple[int, ...], default: float | None,
           domains: list[list[str]], budget: EntryBudget) -> np.ndarray:
    """A dense table (``default`` None: every cost in order) or a sparse one (tuples of values and a cost)."""
    if default is None:
        costs = []
        while (token := tokens.take(f"a cost of function {label} or ']'")) not in CLOSE:
            costs.append(_cost(tokens, token, label))
        if len(costs) != math.prod(shape):
            raise tokens.error(f"function {label} has {len(costs)} costs for {math.prod(shape)} tuples")
        return np.array(costs, dtype=float).reshape(shape)
    budget.take(math.prod(shape), f"the table of function {label}")
    table = np.full(shape, default)
    while (token := tokens.take(f"a tuple of function {label} or ']'")) not in CLOSE:
        tuple_ = []
        for position, domain in enumerate(domains):
            value = token if position == 0 else tokens.take(f"a value of function {label}")
            tuple_.append(_value(tokens, value, domain, label))
        table[tuple(tuple_)] = _cost(tokens, tokens.take(f"a cost of function {label}"), label)
    return table


def _value(tokens: Tokens, token: str, domain: list[str], label: str) -> int:
    name = _unescape(token)
    if name in domain:
        return domain.index(name)
    try:
        index = int(token)
    except ValueError:
        index = -1
    if not 0 <= index < len(domain):
        raise tokens.error(f"function {label}: unknown value {token!r}")
    return index


def _variable(token: str, index: dict[str, int]) -> int | None:
    name = _unescape(token)
    if name in index:
        return index[name]
    if token.isdigit() and int(token) < len(index):
        return int(token)
    return None


def _cost(tokens: Tokens, token: str, label: str) -> float:
    if token.lower() in ("inf", "+inf"):
        return math.inf
    if not _is_cost(token):
        raise tokens.error(f"function {label}: expected a cost, got {token!r}")
    return float(token)


def _is_cost(token: str) -> bool:
    return bool(re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)", token))


def _tag(tokens: Tokens, json_mode: bool, tag: str) -> None:
    if json_mode and (token := tokens.take(f"'{tag}'")) != tag:
        raise tokens.error(f"expected '{tag}', got {token!r}")


def _open(tokens: Tokens, what: str) -> None:
    if (token := tokens.take(f"'{{' opening {what}")) not in OPEN:
        raise tokens.error(f"expected '{{' opening {what}, got {token!r}")


def _close(tokens: Tokens, what: str) -> None:
    if (token := tokens.take(f"'}}' closing {what}")) not in CLOSE:
        raise tokens.error(f"expected '}}' closing {what}, got {token!r}")


def _unescape(token: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), token)


# ---------------------------------------------------------------------------------------------------- writing
def _escape(name: str) -> str:
    """``name`` as a CFN string: every character toulbar2 would split on or misread, and ``%``, as ``%XX``."""
    return _SPECIAL.sub(lambda m: f"%{ord(m.group(0)):02X}", name)


def _decimal(value: float) -> str:
    """The shortest decimal that reads back as ``value``, without an exponent (CFN has none)."""
    return np.format_float_positional(value, trim="-", unique=True)


def _arrays(problem: Problem) -> list[np.ndarray]:
    return [node.costs for node in problem.nodes] + list(problem.pairs.values())


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
