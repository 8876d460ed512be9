"""docs/graphs.md's operator catalogue is the registry's: no operator missing, none extra, and
every row states its operator's ports and parameters as the registry has them."""

from dataclasses import replace

from operators.graph import CATALOGUE, OpKind, Param
from tests.docs.catalogue import GRAPHS_MD, catalogue_problems, rows


def test_the_docs_describe_exactly_the_registered_operators() -> None:
    assert catalogue_problems(CATALOGUE) == []


def test_the_table_parses() -> None:
    # The check is only as good as its hold on the table: every row, every operator.
    table = rows(GRAPHS_MD.read_text(encoding="utf-8"))
    assert len(table) == 17
    assert sum(len(row.ops) for row in table) == 18


def test_drift_is_reported_operator_by_operator() -> None:
    registry = dict(CATALOGUE)
    del registry["inspect"]
    registry["map"] = replace(registry["map"], inputs=2)
    aggregate = registry["aggregate"]
    registry["aggregate"] = replace(
        aggregate,
        params={**aggregate.params, "emit": Param("expr", variables=("key", "acc", "t"))},
    )
    partition = registry["partition"]
    registry["partition"] = replace(
        partition, params={**partition.params, "parts": Param("int", minimum=2)}
    )
    registry["tally"] = OpKind("tally", 1, 1, builder=lambda inputs, params: inputs)
    assert catalogue_problems(registry) == [
        "docs/graphs.md describes 'inspect', which is not a registered operator",
        "map: 2 inputs in the registry, 1 in the docs",
        "partition: parameter 'parts' is an int >= 2, not (int >= 1)",
        "aggregate: parameter 'emit' is required (no `?`) in the registry",
        "aggregate: parameter 'emit' has the variables (key, acc, t), not (key, acc)",
        "docs/graphs.md does not describe the registered operator 'tally'",
    ]


def test_a_row_without_its_parameters_is_drift() -> None:
    text = GRAPHS_MD.read_text(encoding="utf-8")
    text = text.replace(
        "| `join` | 2 | 1 | `key_left` (r), `key_right` (r) |", "| `join` | 2 | 1 | |"
    )
    text = text.replace("### delay", "### later")
    assert catalogue_problems(CATALOGUE, text) == [
        "join: parameters ['key_left', 'key_right'] in the registry, [] in the docs",
        "docs/graphs.md has no ### section (worked example) for 'delay'",
    ]
