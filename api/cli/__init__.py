"""The ``frontier`` command and its subcommands.

serve, submit, push, watch, tail, why, dataflows, input, sessions, consumers, check,
rescale, demo.

Every client command talks to a server at ``--url`` (default ``$FRONTIER_URL`` or
``http://127.0.0.1:8080``) with ``--token`` (default ``$FRONTIER_TOKEN``).

The commands live by what they do: :mod:`api.cli.serving` starts the server (the
addresses of its cluster flags checked by :mod:`api.cli.clustering`),
:mod:`api.cli.producing` submits graphs and pushes records, :mod:`api.cli.managing` lists,
describes, advances and closes the API's resources, :mod:`api.cli.watching` follows
frontiers and outputs and explains what holds a time back, :mod:`api.cli.directory` checks
(and repairs) a data directory, :mod:`api.cli.rescaling` moves inputs between data
directories to change a cluster's shape; :mod:`api.cli.common` has what the client commands share.
"""

from __future__ import annotations

import click

from api.cli.common import FrontierGroup, asyncio_run
from api.cli.directory import check_directory
from api.cli.managing import consumers, dataflows, input_group, sessions
from api.cli.producing import push, submit
from api.cli.rescaling import rescale
from api.cli.serving import DEMO_GRAPH, GC_GEN0_THRESHOLD, serve
from api.cli.watching import stats, tail, watch, why, why_tree


@click.group(cls=FrontierGroup)
@click.version_option(package_name="frontier", message="frontier %(version)s")
@click.option(
    "--debug",
    is_flag=True,
    help="Show the traceback of an error (also $FRONTIER_DEBUG=1); without it an error is "
    "one line.",
)
def main(debug: bool) -> None:
    """Frontier: timely dataflow as a service.

    The client commands talk to --url (default $FRONTIER_URL or http://127.0.0.1:8080). A
    DATAFLOW argument is a dataflow's id, or its name when one dataflow has it.
    """


@click.command()
def demo() -> None:
    """The progress-core demo: frontiers moving around a loop, no server."""
    from service.demo import main as demo_main

    demo_main()


main.add_command(serve)
main.add_command(submit)
main.add_command(push)
main.add_command(watch)
main.add_command(tail)
main.add_command(stats)
main.add_command(why)
main.add_command(dataflows)
main.add_command(input_group)
main.add_command(sessions)
main.add_command(consumers)
main.add_command(demo)
main.add_command(check_directory)
main.add_command(rescale)

__all__ = [
    "DEMO_GRAPH",
    "GC_GEN0_THRESHOLD",
    "asyncio_run",
    "check_directory",
    "consumers",
    "dataflows",
    "demo",
    "input_group",
    "main",
    "push",
    "rescale",
    "serve",
    "sessions",
    "submit",
    "tail",
    "watch",
    "why",
    "why_tree",
]
