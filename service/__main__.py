"""Command-line entry point: ``python -m service`` and the ``frontier`` console script."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def _run_demo(_args: argparse.Namespace) -> int:
    """Run the progress-core demo.

    The demo module is imported lazily so that other subcommands never pay for it.

    Args:
        _args: The parsed command-line arguments (unused).

    Returns:
        The process exit status.
    """
    from service.demo import main as demo_main

    demo_main()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Build the command-line parser.

    Returns:
        The parser, with one subparser per subcommand.
    """
    parser = argparse.ArgumentParser(
        prog="frontier",
        description="Timely dataflow as an asyncio service.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = subparsers.add_parser(
        "demo",
        help="run the progress-core demo (the default when no command is given)",
    )
    demo.set_defaults(handler=_run_demo)
    parser.set_defaults(handler=_run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the chosen subcommand.

    Args:
        argv: The arguments, without the program name; ``None`` means ``sys.argv[1:]``.

    Returns:
        The process exit status.
    """
    args = build_parser().parse_args(argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
