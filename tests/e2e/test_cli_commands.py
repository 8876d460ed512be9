"""The commands that cover the API, against a real server, with exact outputs: dataflows,
input, sessions, consumers (and ``--json``), ``--version`` and shell completion."""

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson

from api.client import Client
from tests.e2e.conftest import REPO, Server
from tests.e2e.test_cli import GRAPH_YAML, frontier_cli
from tests.e2e.test_cli_push import until

CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def run(server: Server, *args: str) -> str:
    """The command's standard output; it must succeed and print no error."""
    result = frontier_cli(server, *args)
    assert (result.returncode, result.stderr) == (0, ""), (args, result)
    return result.stdout


def test_dataflows_list_get_drop(start_server: object, tmp_path: Path) -> None:
    server = start_server()  # type: ignore[operator]
    assert run(server, "dataflows", "list") == "no dataflows\n"
    assert run(server, "dataflows", "list", "--json") == "[]\n"
    graph = tmp_path / "lengths.yaml"
    graph.write_text(GRAPH_YAML.replace("name: lengths\n", ""))
    created = run(server, "submit", str(graph))
    [dataflow] = re.fullmatch(
        r"created dataflow ([0-9a-f]{32}) named lengths .*\n", created
    ).groups()  # type: ignore[union-attr]
    assert created == f"created dataflow {dataflow} named lengths (inputs: words; outputs: out)\n"
    listed = CREATED.sub("YYYY-MM-DDTHH:MM:SSZ", run(server, "dataflows", "list"))
    assert listed == (
        f"{'ID':32}  NAME     STATUS   CREATED               INPUTS  OUTPUTS\n"
        f"{dataflow}  lengths  running  YYYY-MM-DDTHH:MM:SSZ  words   out\n"
    )
    [item] = orjson.loads(run(server, "dataflows", "list", "--json"))
    assert (item["id"], item["name"], item["inputs"]) == (dataflow, "lengths", ["words"])

    records = tmp_path / "records.jsonl"
    records.write_text('[0, "ab"]\n[1, "c"]\n')
    run(server, "push", dataflow, "words", str(records))
    with Client(server.url) as client:
        until(lambda: client.output_frontier(dataflow, "out") == [2])
    described = CREATED.sub("T", run(server, "dataflows", "get", dataflow))
    assert described == (
        f"dataflow {dataflow} named lengths: running, created T\n"
        "  input words: frontier [2], 2 records in, 0 sessions open\n"
        "  output out: frontier [2], 2 records out\n"
    )
    full = orjson.loads(run(server, "dataflows", "get", dataflow, "--json"))
    assert full["graph"]["nodes"]["lengths"] == {"op": "map", "expr": "size(r)"}
    assert run(server, "dataflows", "drop", dataflow) == f"dropped dataflow {dataflow}\n"
    gone = frontier_cli(server, "dataflows", "drop", dataflow)
    assert (gone.returncode, gone.stderr) == (
        1,
        f"error: Gone (410): dataflow {dataflow!r} was dropped\n",
    )


def test_input_sessions_and_consumers(service: Server, tmp_path: Path) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    dataflow = orjson.loads(run(service, "submit", str(graph), "--json"))["id"]

    assert (
        run(service, "sessions", "list", dataflow, "words") == "no sessions open on input words\n"
    )
    opened = run(service, "sessions", "open", dataflow, "words", "--start", "2")
    [session] = re.fullmatch(r"session ([0-9a-f]+) at 2\n", opened).groups()  # type: ignore[union-attr]
    assert run(service, "sessions", "list", dataflow, "words") == (
        f"SESSION{' ' * (len(session) - 5)}TIME\n{session}  2\n"
    )
    assert orjson.loads(run(service, "sessions", "list", dataflow, "words", "--json")) == [
        {"session": session, "time": 2}
    ]
    # An open session holds the input where it was: advancing it without a session waits.
    assert run(service, "input", "advance", dataflow, "words", "5") == "input words: frontier [0]\n"
    assert run(service, "input", "get", dataflow, "words") == (
        "input words: frontier [0] (at 0), 0 records in, 1 sessions open, "
        "0 transactions open (0 staged)\n"
    )
    assert run(service, "sessions", "close", dataflow, "words", session) == (
        f"closed session {session}; input words: frontier [0]\n"
    )
    ack = orjson.loads(run(service, "input", "advance", dataflow, "words", "7", "--json"))
    assert ack["input_frontier"] == [7]

    assert run(service, "consumers", "list", dataflow, "out") == "no consumers of output out\n"
    assert run(service, "consumers", "commit", dataflow, "out", "nightly", "3") == (
        "consumer nightly committed 3; output out: frontier [7]\n"
    )
    assert run(service, "consumers", "list", dataflow, "out") == (
        "CONSUMER  COMMITTED\nnightly   3\n"
    )
    assert orjson.loads(run(service, "consumers", "list", dataflow, "out", "--json")) == [
        {"consumer": "nightly", "committed": 3}
    ]
    assert run(service, "consumers", "drop", dataflow, "out", "nightly") == (
        "dropped consumer nightly of output out\n"
    )
    assert run(service, "input", "close", dataflow, "words") == (
        "input words: frontier [] (complete)\n"
    )
    assert orjson.loads(run(service, "input", "get", dataflow, "words", "--json"))["closed"]
    bad = frontier_cli(service, "input", "advance", dataflow, "words", "soon")
    assert (bad.returncode, bad.stderr) == (
        2,
        "error: Invalid value for TIME: 'soon' is not a time (an integer, or [outer, inner] as "
        "JSON) (see python -m api input advance --help)\n",
    )


def test_shell_completion_as_the_readme_says() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "_FRONTIER_COMPLETE": "bash_source"}
    command = [sys.executable, "-c", "from api.cli import main; main(prog_name='frontier')"]
    script = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert script.returncode == 0
    assert "_frontier_completion()" in script.stdout
    env.update(_FRONTIER_COMPLETE="bash_complete", COMP_WORDS="frontier data", COMP_CWORD="1")
    words = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert words.stdout == "plain,dataflows\n"


def test_submit_names_the_dataflow_and_list_finds_it_by_name(
    start_server: object, tmp_path: Path
) -> None:
    server = start_server()  # type: ignore[operator]
    named = tmp_path / "graph.yaml"
    named.write_text(GRAPH_YAML)  # name: lengths
    unnamed = tmp_path / "counts.yaml"
    unnamed.write_text(GRAPH_YAML.replace("name: lengths\n", ""))
    ids = {}
    for label, args, stdin in [
        ("graph's", (str(named),), None),
        ("flag's", (str(named), "--name", "mine"), None),
        ("stem's", (str(unnamed),), None),
        ("none", ("-",), GRAPH_YAML.replace("name: lengths\n", "")),
    ]:
        result = frontier_cli(server, "submit", *args, "--json", stdin=stdin)
        assert result.returncode == 0, result.stderr
        ids[label] = (orjson.loads(result.stdout)["id"], orjson.loads(result.stdout)["name"])
    assert [name for _, name in ids.values()] == ["lengths", "mine", "counts", ""]
    # The API keeps a graph's name when the request gives none.
    with Client(server.url) as client:
        posted = client.create_dataflow({**yaml_graph(), "name": "g"})
        assert posted["name"] == "g"
        assert [d["id"] for d in client.dataflows(name="lengths")] == [ids["graph's"][0]]
    mine = ids["flag's"][0]
    listed = CREATED.sub("YYYY-MM-DDTHH:MM:SSZ", run(server, "dataflows", "list", "--name", "mine"))
    assert listed == (
        f"{'ID':32}  NAME  STATUS   CREATED               INPUTS  OUTPUTS\n"
        f"{mine}  mine  running  YYYY-MM-DDTHH:MM:SSZ  words   out\n"
    )
    assert run(server, "dataflows", "list", "--name", "nobody") == "no dataflows named nobody\n"
    everything = run(server, "dataflows", "list")
    assert [line.split()[1] for line in everything.splitlines()[1:]] == [
        "lengths",
        "mine",
        "counts",
        "-",
        "g",
    ]


def yaml_graph() -> dict[str, object]:
    import yaml

    graph: dict[str, object] = yaml.safe_load(GRAPH_YAML)
    return graph


def test_check_and_rescale_plan_print_json(tmp_path: Path) -> None:
    from tests.e2e.conftest import launch

    server = launch(tmp_path / "server")
    try:
        with Client(server.url) as client:
            dataflow = client.create_dataflow(yaml_graph(), "lengths")["id"]
            client.session(dataflow, "words").push([[0, "a"]])
    finally:
        server.stop()
    data = tmp_path / "server" / "data"
    result = frontier_cli(server, "check", str(data), "--json")
    assert (result.returncode, result.stderr) == (0, ""), result
    report = orjson.loads(result.stdout)
    assert (report["directory"], report["problems"], report["healthy"]) == (str(data), [], True)
    assert list(report["dataflows"]) == [dataflow]
    assert [log["frames"] > 0 for log in report["logs"]] == [True] * len(report["logs"])
    plan = frontier_cli(server, "rescale", "plan", "--data-dir", str(data), "--processes", "1")
    assert (plan.returncode, plan.stdout) == (0, "")
    planned = frontier_cli(
        server, "rescale", "plan", "--data-dir", str(data), "--processes", "1", "--json"
    )
    assert (planned.returncode, planned.stdout) == (0, "[]\n")


def test_a_dataflow_is_named_where_its_id_goes(start_server: object, tmp_path: Path) -> None:
    server = start_server()  # type: ignore[operator]
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)  # name: lengths
    dataflow = orjson.loads(run(server, "submit", str(graph), "--json"))["id"]
    records = tmp_path / "records.jsonl"
    records.write_text('[0, "ab"]\n')
    assert run(server, "push", "lengths", "words", str(records)).splitlines()[:2] == [
        "pushed 1 records at time 0 into words",
        "input words: frontier [1]",
    ]
    assert run(server, "input", "get", "lengths", "words").startswith(
        "input words: frontier [1] (at 1), 1 records in"
    )
    unknown = frontier_cli(server, "dataflows", "get", "nameless")
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "error: no dataflow has the id or name 'nameless' (frontier dataflows list shows them)\n",
    )
    second = orjson.loads(run(server, "submit", str(graph), "--json"))["id"]
    twice = frontier_cli(server, "watch", "lengths")
    assert (twice.returncode, twice.stderr) == (
        1,
        f"error: 2 dataflows are named 'lengths' ({dataflow}, {second}): give an id\n",
    )
    assert run(server, "dataflows", "drop", second) == f"dropped dataflow {second}\n"
    assert run(server, "dataflows", "drop", "lengths") == f"dropped dataflow {dataflow}\n"
