"""The ``om-stream`` command line. Parses arguments, configures logging once, and hands over to the runtime."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from om_stream import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="om-stream",
                                     description="Observational Memory for AI agents, as a Kafka sidecar")
    parser.add_argument("--version", action="version", version=f"om-stream {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "version":
        print(__version__)
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
