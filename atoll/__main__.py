"""Atoll's command line: ``python -m atoll --version`` and ``python -m atoll demo [--address auto ...]``.

Installed as the ``atoll`` command too, so that an installed package (a wheel on a cluster node) can show its
version and run the demo without a source checkout; ``./scripts/demo`` calls ``python -m atoll demo``.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import __version__


def main(argv: Optional[List[str]] = None) -> int:
    """Parse ``argv`` (default: the process's arguments) and run the command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m atoll", description="Atoll: Pekko-Streams-style streaming "
                                     "on Ray, with Spark via RayDP.")
    parser.add_argument("--version", action="version", version=f"atoll {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("demo", add_help=False,
                        help="run the demo (Spark -> two islands -> Spark, then a kill switch); "
                             "`demo --help` lists its options")
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.command == "demo":
        from .demo import main as demo_main

        return demo_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
