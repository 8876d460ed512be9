"""The check of docs/graphs.md's operator catalogue against an operator registry.

The table in "## The operators" must have a row for every registered operator and none for
an operator that is not registered; each row must state the operator's ports and its
parameters as the registry has them (names in order, `?` for optional ones, an expression's
variables, an int's least value), and a `###` section of that chapter must name it (its
worked example). The check takes the registry as a parameter, so a test can check an
operator it registers itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from operators.graph.registry import OpKind, Param

GRAPHS_MD = Path(__file__).resolve().parents[2] / "docs" / "graphs.md"


@dataclass(frozen=True)
class Row:
    """One row of the catalogue table: the operators it names and its three other cells."""

    ops: list[str]
    inputs: str
    outputs: str
    params: str


def chapter(text: str) -> str:
    """The "## The operators" chapter of docs/graphs.md."""
    start = text.index("\n## The operators\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def rows(text: str) -> list[Row]:
    """The rows of the chapter's catalogue table (the first table in it)."""
    found: list[Row] = []
    for line in chapter(text).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        found.append(Row(re.findall(r"`([^`]+)`", cells[0]), *cells[1:]))
    return found


def sections(text: str) -> set[str]:
    """The words of the chapter's `###` headings (one names each operator it shows)."""
    words: set[str] = set()
    for heading in re.findall(r"^### (.+)$", chapter(text), flags=re.M):
        words.update(re.findall(r"[a-z_]+", heading))
    return words


def documented_params(cell: str) -> list[tuple[str, bool, str]]:
    """``(name, optional, what follows in parentheses)`` for each parameter of a cell."""
    return [
        (name, mark == "?", detail)
        for name, mark, detail in re.findall(r"`(\w+)`(\??)(?: \(([^)]*)\))?", cell)
    ]


def _param_problems(op: str, name: str, param: Param, optional: bool, detail: str) -> list[str]:
    problems: list[str] = []
    if optional == param.required:
        wanted = "optional (`?`)" if not param.required else "required (no `?`)"
        problems.append(f"{op}: parameter {name!r} is {wanted} in the registry")
    if param.kind == "expr" and detail != ", ".join(param.variables):
        variables = ", ".join(param.variables)
        problems.append(f"{op}: parameter {name!r} has the variables ({variables}), not ({detail})")
    if param.kind == "int" and not detail.startswith(f"int >= {param.minimum}"):
        problems.append(f"{op}: parameter {name!r} is an int >= {param.minimum}, not ({detail})")
    return problems


def _row_problems(op: str, kind: OpKind, row: Row) -> list[str]:
    problems: list[str] = []
    inputs = "1 or more" if kind.inputs is None else str(kind.inputs)
    if row.inputs != inputs:
        problems.append(f"{op}: {inputs} inputs in the registry, {row.inputs} in the docs")
    outputs = f"`{kind.outputs}`" if isinstance(kind.outputs, str) else str(kind.outputs)
    if row.outputs != outputs:
        problems.append(f"{op}: {outputs} outputs in the registry, {row.outputs} in the docs")
    # on_error is stated once for all: "All operators with expressions also take on_error".
    expected = [name for name in kind.params if name != "on_error"]
    documented = documented_params(row.params)
    if [name for name, _, _ in documented] != expected:
        names = [name for name, _, _ in documented]
        problems.append(f"{op}: parameters {expected} in the registry, {names} in the docs")
        return problems
    for name, optional, detail in documented:
        problems.extend(_param_problems(op, name, kind.params[name], optional, detail))
    takes_expressions = any(p.kind == "expr" for p in kind.params.values())
    if ("on_error" in kind.params) != takes_expressions:
        problems.append(f"{op}: the docs say exactly the operators with expressions take on_error")
    return problems


def catalogue_problems(registry: Mapping[str, OpKind], text: str | None = None) -> list[str]:
    """How docs/graphs.md's catalogue differs from ``registry`` (empty: it does not)."""
    text = GRAPHS_MD.read_text(encoding="utf-8") if text is None else text
    by_op = {op: row for row in rows(text) for op in row.ops}
    headings = sections(text)
    problems = [
        f"docs/graphs.md describes {op!r}, which is not a registered operator"
        for op in by_op
        if op not in registry
    ]
    for op, kind in registry.items():
        if op not in by_op:
            problems.append(f"docs/graphs.md does not describe the registered operator {op!r}")
            continue
        problems.extend(_row_problems(op, kind, by_op[op]))
        if op not in headings:
            problems.append(f"docs/graphs.md has no ### section (worked example) for {op!r}")
    return problems
