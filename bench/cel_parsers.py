"""CEL parsing: the hand-written parser (``operators.graph.cel``) beside a lark grammar.

The measurement behind ``docs/cel-parser.md`` (issue 15: keep the hand-written parser or parse
with a maintained grammar). Parse to parse: the hand-written side is the project's lexer and
recursive-descent parser called directly (``_Lexer(source).tokens()`` then ``_Parser.parse()``,
with ``compile_expression``'s default limits), without type checking or code generation; the
lark side is ``bench/cel_lark.lark`` (written from cel-spec's ``doc/langdef.md``), LALR(1) with
lark's basic lexer, parsing to a lark ``Tree``, plus the one check the LALR grammar leaves out
(a message construction ``a.b.C{...}`` must follow a dotted name).

Three measurements:

1. **Conformance of the syntax**: every expression of the cel-spec ``simple`` test data in
   ``tests/unit/graph/cel_conformance/testdata`` (all files, read with the conformance test's
   textproto parser), accepted or refused by each parser. The data marks no case as a parse
   error (each expects a value, or an evaluation or check error), so each should be accepted;
   beside it, a short list of expressions langdef's grammar and lexis refuse
   (:data:`INVALID`), each of which should be refused. Disagreements are listed (20 at most).
2. **Error messages**: :data:`MALFORMED` through both, the messages side by side, and whether
   each names the line and the column.
3. **Parse time**: 1,000 expressions of the docs' and ``bench/expressions.py``'s shapes, varied
   (a 1,000-node graph's expressions), all parsed by each parser; the median (and best) of
   ``--repeats`` runs, interleaved, each after a ``gc.collect()``.

Needs ``lark`` (``.venv/bin/pip install lark``; not a dependency of the project). From the
repository root::

    .venv/bin/python bench/cel_parsers.py
    .venv/bin/python bench/cel_parsers.py --repeats 9 --json bench/results/cel_parsers.json
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lark  # noqa: E402

from operators.graph.cel import ExpressionError, compile_expression  # noqa: E402
from operators.graph.cel.lexer import _Lexer  # noqa: E402
from operators.graph.cel.syntax import _Parser  # noqa: E402
from tests.unit.graph.test_cel_conformance import load_cases  # noqa: E402

GRAMMAR = Path(__file__).resolve().parent / "cel_lark.lark"
_DEFAULTS = compile_expression.__kwdefaults__ or {}
MAX_DEPTH: int = _DEFAULTS.get("max_depth", 48)
MAX_NODES: int = _DEFAULTS.get("max_nodes", 2000)

# --------------------------------------------------------------------------- the two parsers


def hand_parse(source: str) -> object:
    """The project's lexer and parser, nothing after them."""
    return _Parser(source, _Lexer(source).tokens(), MAX_DEPTH, MAX_NODES).parse()


class MessageTargetError(ValueError):
    """A message construction after something that is not a (dotted) name: ``f(x){a: 1}``."""

    def __init__(self, token: lark.Token) -> None:
        super().__init__(
            f"a message type must be a name, at line {token.line}, column {token.column}"
        )
        self.line, self.column = token.line, token.column


def _first_token(tree: lark.Tree | lark.Token) -> lark.Token:
    while isinstance(tree, lark.Tree):
        tree = next(child for child in tree.children if child is not None)
    return tree


def _is_name(tree: lark.Tree | lark.Token) -> bool:
    if isinstance(tree, lark.Tree) and tree.data == "ident":
        return True
    return isinstance(tree, lark.Tree) and tree.data == "select" and _is_name(tree.children[0])


def _check_messages(tree: lark.Tree) -> None:
    for node in tree.iter_subtrees():
        if node.data == "message" and not _is_name(node.children[0]):
            raise MessageTargetError(_first_token(node.children[0]))


def make_lark_parse() -> tuple[Callable[[str], object], float]:
    """The lark front end and the seconds it took to build (once per process)."""
    start = time.perf_counter()
    parser = lark.Lark(GRAMMAR.read_text(), parser="lalr", lexer="basic", start="start")
    built = time.perf_counter() - start

    def lark_parse(source: str) -> object:
        tree = parser.parse(source)
        if isinstance(tree, lark.Tree):
            _check_messages(tree)
        return tree

    return lark_parse, built


Refusal = tuple[str, int | None, int | None]
"""A refusal's message (first line) and the line and column it names, if any."""


def refusal(parse: Callable[[str], object], source: str) -> Refusal | None:
    """None if ``parse`` accepts ``source``, else its message, line and column."""
    try:
        parse(source)
    except ExpressionError as error:
        return str(error), error.line, error.column
    except (lark.exceptions.LarkError, MessageTargetError) as error:
        first = str(error).strip().splitlines()[0]
        return first, getattr(error, "line", None), getattr(error, "column", None)
    except RecursionError:
        return "RecursionError", None, None
    return None


# --------------------------------------------------------------------------- 1. conformance

INVALID: list[tuple[str, str]] = [
    ("if", "a reserved word as an identifier"),
    ("while(1)", "a reserved word as a function name"),
    ("a.in", "a keyword as a selector"),
    ("a.true", "a keyword as a selector"),
    ("{'a': 1}.null", "a keyword as a selector"),
    ("a.", "a selector missing at the end"),
    ("1 +", "an operand missing"),
    ("a ? b", "a conditional without ':'"),
    ("[1,,2]", "an empty list element"),
    ("{1 2}", "a map entry without ':'"),
    ("f(,)", "an empty argument"),
    ("a..b", "two dots"),
    ('"abc', "an unterminated string"),
    ("'''abc", "an unterminated triple-quoted string"),
    ('"\\q"', "an escape langdef does not list"),
    ('"\\0"', "an octal escape of one digit"),
    ("'\\u12'", "a \\u escape of two digits"),
    ("'a\nb'", "a newline in a single-quoted string"),
    ("a = 1", "'=' is not an operator"),
    ("a && || b", "two operators"),
    ("0x", "a hex literal without digits"),
    ("f(x){a: 1}", "a message construction after a call"),
    ("a.b{1: 2}", "a message field that is not a name"),
    ("1 # 2", "a character CEL has no token for"),
]
"""Expressions that cel-spec's langdef refuses (its grammar, lexis or reserved words)."""


def features(tree: object) -> list[str]:
    """The syntax in a lark tree that the hand-written parser refuses by design or by choice."""
    found: set[str] = set()
    if isinstance(tree, lark.Tree):
        for node in tree.iter_subtrees():
            if node.data == "message":
                found.add("message construction")
            elif node.data in ("ident", "call") and node.children[0] is not None:
                found.add("leading dot")
            elif node.data == "reserved":
                found.add("reserved word as a selector/method/field")
            elif node.data == "literal" and node.children[0].type == "BYTES":
                found.add("bytes literal")
    return sorted(found) or ["none of these"]


def conformance(parsers: dict[str, Callable[[str], object]], limit: int = 20) -> dict[str, Any]:
    cases = load_cases()
    parse_error_cases = [
        case
        for case in cases
        if any(
            word in repr(case.test.get("eval_error", "")).lower()
            for word in ("syntax error", "parse error: ", "mismatched input")
        )
    ]
    results: dict[str, Any] = {"cases": len(cases), "marked_parse_errors": len(parse_error_cases)}
    refused: dict[str, dict[str, Refusal]] = {name: {} for name in parsers}
    for case in cases:
        for name, parse in parsers.items():
            outcome = refusal(parse, case.expr)
            if outcome is not None:
                refused[name][case.id] = outcome
    by_id = {case.id: case for case in cases}
    for name in parsers:
        results[name] = {
            "accepted": len(cases) - len(refused[name]),
            "refused_by_file": dict(
                Counter(by_id[case_id].file for case_id in refused[name]).most_common()
            ),
        }
    first, second = list(parsers)
    differ = sorted(set(refused[first]) ^ set(refused[second]))
    results["disagreements"] = len(differ)
    lark_parse = parsers["lark"]
    results["hand_refuses_lark_accepts_by_feature"] = dict(
        Counter(
            " + ".join(features(lark_parse(by_id[case_id].expr)))
            for case_id in differ
            if case_id in refused["hand-written"] and case_id not in refused["lark"]
        ).most_common()
    )
    results["disagreement_list"] = [
        {
            "case": case_id,
            "expr": by_id[case_id].expr,
            first: refused[first].get(case_id, ("accepted",))[0],
            second: refused[second].get(case_id, ("accepted",))[0],
        }
        for case_id in differ[:limit]
    ]
    both = sorted(set(refused[first]) & set(refused[second]))
    results["refused_by_both"] = len(both)
    results["refused_by_both_list"] = [
        {"case": case_id, "expr": by_id[case_id].expr} for case_id in both[:limit]
    ]
    invalid: dict[str, Any] = {"expressions": len(INVALID)}
    for name, parse in parsers.items():
        accepted = [(source, why) for source, why in INVALID if refusal(parse, source) is None]
        invalid[name] = {"refused": len(INVALID) - len(accepted), "accepted": accepted}
    results["invalid"] = invalid
    return results


# --------------------------------------------------------------------------- 2. error messages

MALFORMED: list[tuple[str, str]] = [
    ("unbalanced parens", "(r.a + (r.b * 2)"),
    ("unbalanced, closing", "r.a + r.b) * 2"),
    ("stray operator", "r.a * / 2"),
    ("unterminated string", "r.name == 'abc"),
    ("bad escape", 'r.name == "a\\qb"'),
    ("reserved word", "r.a + if"),
    ("'a.' at the end", "r.a."),
    ("missing ':' in ?:", "r.a > 1 ? 'big'"),
    ("bad character", "r.a # 2"),
    ("line 3", "r.a > 1 &&\n  r.b < 2 &&\n  r.c == ) "),
    ("line 3, bad escape", "r.a > 1 &&\n  r.b < 2 &&\n  r.c == '\\z'"),
]


def error_messages(parsers: dict[str, Callable[[str], object]]) -> list[dict[str, Any]]:
    rows = []
    for label, source in MALFORMED:
        row: dict[str, Any] = {"case": label, "source": source}
        for name, parse in parsers.items():
            outcome = refusal(parse, source)
            row[name] = (
                {"message": "accepted", "line": None, "column": None}
                if outcome is None
                else {"message": outcome[0], "line": outcome[1], "column": outcome[2]}
            )
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- 3. parse time

SHAPES: list[str] = [
    'r.value * {n} > 10 && r.key != "x{n}"',
    "r.value / {n} + r.value % 3 in [1, 2, {n}]",
    'r.tags.exists(t, t == "b{n}")',
    "{{'key': r.key, 'double': r.value * {n}}}",
    "r.tags.map(t, r.id + ':' + t + '{n}')",
    "[r.k, r.v % {n}]",
    "r.size > {n} || r.name.startsWith('w{n}')",
    "r.a.b.c[{n}] < 10.5 ? r.a.x : -{n}",
    "r.items.filter(i, i.price * {n}u > 100u && !i.hidden).size() > 0",
    "has(r.meta) && r.meta.region in ['eu', 'us{n}'] && int(r.meta.zone) >= {n}",
]
"""Expressions of the sizes the docs use (``docs/graphs.md``, ``bench/expressions.py``): a
node's expression; ``{n}`` varies the constant so that no two of the 1,000 are the same."""


def graph_expressions(count: int = 1000) -> list[str]:
    return [SHAPES[i % len(SHAPES)].format(n=i) for i in range(count)]


def parse_time(
    parsers: dict[str, Callable[[str], object]], expressions: list[str], repeats: int
) -> dict[str, Any]:
    for parse in parsers.values():  # each must accept all, and warm up
        for source in expressions:
            parse(source)
    times: dict[str, list[float]] = {name: [] for name in parsers}
    for repeat in range(repeats):
        order = list(parsers) if repeat % 2 == 0 else list(reversed(parsers))
        for name in order:
            parse = parsers[name]
            gc.collect()
            start = time.perf_counter()
            for source in expressions:
                parse(source)
            times[name].append(time.perf_counter() - start)
    return {
        "expressions": len(expressions),
        "characters": sum(map(len, expressions)),
        **{
            name: {"median_ms": statistics.median(t) * 1e3, "best_ms": min(t) * 1e3}
            for name, t in times.items()
        },
    }


# --------------------------------------------------------------------------- report


def _cell(outcome: dict[str, Any]) -> str:
    where = "yes" if outcome["line"] is not None and outcome["column"] is not None else "no"
    return f"[line/col: {where}] {outcome['message']}"


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--repeats", type=int, default=5)
    options.add_argument("--count", type=int, default=1000)
    options.add_argument("--json", type=Path)
    args = options.parse_args()

    lark_parse, built = make_lark_parse()
    parsers: dict[str, Callable[[str], object]] = {"hand-written": hand_parse, "lark": lark_parse}
    print(f"lark {lark.__version__}: LALR(1), basic lexer; grammar built in {built * 1e3:.0f} ms")

    print("\n1. Conformance of the syntax (cel-spec simple test data, all files)")
    conf = conformance(parsers)
    print(f"   {conf['cases']} expressions; {conf['marked_parse_errors']} marked as parse errors")
    for name in parsers:
        print(
            f"   {name:13} accepts {conf[name]['accepted']} of {conf['cases']}; "
            f"refused by file: {conf[name]['refused_by_file']}"
        )
    print(f"   refused by both: {conf['refused_by_both']}")
    for row in conf["refused_by_both_list"]:
        print(f"      {row['case']}: {row['expr']!r}")
    print("   refused by the hand-written parser, accepted by lark, by the syntax they use:")
    for feature, count in conf["hand_refuses_lark_accepts_by_feature"].items():
        print(f"      {count:4}  {feature}")
    print(f"   disagreements: {conf['disagreements']} (first 20)")
    for row in conf["disagreement_list"]:
        print(f"      {row['case']}: {row['expr']!r}")
        for name in parsers:
            print(f"         {name:13} {row[name]}")
    invalid = conf["invalid"]
    print(f"   invalid by langdef: {invalid['expressions']} expressions")
    for name in parsers:
        print(
            f"   {name:13} refuses {invalid[name]['refused']}; accepts {invalid[name]['accepted']}"
        )

    print("\n2. Error messages")
    rows = error_messages(parsers)
    for row in rows:
        print(f"   {row['case']}: {row['source']!r}")
        for name in parsers:
            print(f"      {name:13} {_cell(row[name])}")

    print(f"\n3. Parse time: {args.count} expressions, median (best) of {args.repeats}")
    timing = parse_time(parsers, graph_expressions(args.count), args.repeats)
    print(f"   {timing['expressions']} expressions, {timing['characters']} characters")
    for name in parsers:
        print(f"   {name:13} {timing[name]['median_ms']:.1f} ms ({timing[name]['best_ms']:.1f})")
    ratio = timing["lark"]["median_ms"] / timing["hand-written"]["median_ms"]
    print(f"   lark / hand-written: {ratio:.2f}x")

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"lark": lark.__version__, "build_ms": built * 1e3, "conformance": conf}
        report |= {"errors": rows, "timing": timing}
        args.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
