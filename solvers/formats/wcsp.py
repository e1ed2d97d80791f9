"""toulbar2's ``.wcsp`` format: a header ``name N max_domain F UB``, the N domain sizes, then F cost functions in
extension (``arity, scope, default cost, number of tuples``, then the tuples with their costs).

Reading: variables are named ``x0``, ``x1`` ... and their values ``v0``, ``v1`` ... (the format has no names); a cost
at or above UB is forbidden (the format's costs are non-negative, so no assignment using it stays below UB); shared
tables (a negative arity defines one, a negative tuple count reuses it) are supported; functions in intension (a
keyword such as ``>=`` or ``salldiff``) and functions of three or more variables are refused with their position.
Writing: the format holds integer costs only, so a problem with other costs is refused (``.cfn`` holds decimals);
forbidden entries are written as UB, one more than the largest finite total; names and ``meta`` are not kept.
"""

from __future__ import annotations

import math

import numpy as np

from solvers.formats.tables import EntryBudget, Tables, functions_of, hard_cost
from solvers.formats.tokens import Tokens
from solvers.problem import Problem, ProblemError


def read_wcsp(text: str) -> Problem:
    """Parse ``.wcsp`` text into a ``Problem`` (see the module docstring)."""
    tokens = Tokens.words(text)
    name = tokens.take("the problem name")
    n = tokens.integer("the number of variables", 1)
    tokens.integer("the maximum domain size")
    count = tokens.integer("the number of cost functions", 0)
    upper = tokens.number("the upper bound")
    sizes = []
    for i in range(n):
        size = tokens.integer(f"the domain size of variable {i}")
        if size <= 0:
            raise tokens.error(f"variable {i} has domain size {size}: interval variables are not supported")
        sizes.append(size)
    budget = EntryBudget(tokens.error)
    budget.take(sum(sizes), "the domains")
    tables = Tables([f"x{i}" for i in range(n)], [[f"v{j}" for j in range(k)] for k in sizes],
                    {"format": "wcsp", "name": name, "upper_bound": upper})
    shared: list[np.ndarray] = []
    for f in range(count):
        label = f"{f} (line {tokens.line})"
        arity = tokens.integer(f"the arity of function {f}")
        scope = [tokens.integer(f"a variable of function {f}", 0) for _ in range(abs(arity))]
        default = tokens.take(f"the default cost of function {f}")
        if default == "-1" and tokens.peek() is not None and not _is_number(tokens.peek()):
            raise tokens.error(f"function {label} is defined in intension ({tokens.peek()!r}): only cost tables "
                               "are supported")
        try:
            default_cost = float(default)
        except ValueError:
            raise tokens.error(f"expected the default cost of function {f} (a number), got {default!r}") from None
        tuples = tokens.integer(f"the number of tuples of function {f}")
        for i in scope:
            if i >= n:
                raise tokens.error(f"function {label}: no variable {i} (there are {n})")
        shape = tuple(sizes[i] for i in scope)
        if tuples < 0:
            if -tuples > len(shared):
                raise tokens.error(f"function {label} reuses shared table {-tuples}, but {len(shared)} are defined")
            table = shared[-tuples - 1]
            if table.shape != shape:
                raise tokens.error(f"function {label}: shared table {-tuples} has shape {table.shape}, not {shape}")
        else:
            budget.take(math.prod(shape), f"the table of function {label}")
            table = np.full(shape, default_cost)
            for _ in range(tuples):
                values = tuple(tokens.integer(f"a value of function {f}", 0) for _ in scope)
                if any(v >= k for v, k in zip(values, shape)):
                    raise tokens.error(f"function {label}: tuple {list(values)} is outside the domains {list(shape)}")
                table[values] = tokens.number(f"a tuple's cost in function {f}")
        if arity < 0:
            shared.append(table)
        tables.add(label, scope, np.where(table >= upper, np.inf, table))
    tokens.end()
    return tables.problem()


def write_wcsp(problem: Problem) -> str:
    """``problem`` as ``.wcsp`` text; ``ProblemError`` when a cost is not an integer."""
    functions = functions_of(problem)
    for scope, table in functions:
        fractional = table[np.isfinite(table) & (table != np.rint(table))]
        if fractional.size:
            names = " -> ".join(repr(problem.nodes[u].name) for u in scope)
            raise ProblemError(f"wcsp holds integer costs only, and {'node' if len(scope) == 1 else 'edge'} {names} "
                               f"has cost {float(fractional[0])!r}; write .cfn for decimal costs")
    upper = int(hard_cost(problem))
    lines = [f"{_token(problem.meta.get('name'))} {problem.num_nodes} {max(problem.domain_sizes)} {len(functions)} "
             f"{upper}", " ".join(map(str, problem.domain_sizes))]
    for scope, table in functions:
        shape = tuple(problem.domain_sizes[i] for i in scope)
        entries = [(index, cost) for index, cost in zip(np.ndindex(shape), table) if cost != 0]
        lines.append(f"{len(scope)} {' '.join(map(str, scope))} 0 {len(entries)}")
        lines += [" ".join(map(str, index)) + f" {upper if np.isinf(cost) else int(cost)}" for index, cost in entries]
    return "\n".join(lines) + "\n"


def _token(name: object) -> str:
    """The header's problem name: ``meta["name"]`` when it is one word, else ``tessera``."""
    return name if isinstance(name, str) and name and not any(c.isspace() for c in name) else "tessera"


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
