"""The `bertdata` command line: one subcommand per module in `bertdata.commands`."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys

from bertdata import __version__
from bertdata.commands import COMMANDS
from bertdata.errors import BertdataError, Stopped

DESCRIPTION = """\
Turn a Wikipedia dump into BERT pretraining data -- the hdf5 shards the NGC
PyTorch BERT recipe trains on -- and measure how fast BERT trains on them.

typical session:
  bertdata build --wiki-only             download, clean, split, tokenize, write hdf5
  bertdata inspect data/hdf5_*/          validate shards and print statistics
  bertdata shard data/hdf5_*/ --output parts --parts 100
  bertdata bench --data parts            train BERT and report sequences/s

Run `bertdata COMMAND --help` for each command's options.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertdata",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bertdata {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"bertdata.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Libraries' warnings (Beam's about optional cloud clients, say) are not the user's business;
    # commands print what matters themselves.
    logging.basicConfig(level=logging.ERROR, format="%(name)s: %(message)s")
    try:  # a Ctrl-C while the commands' modules load is as much an interrupt as one in a command
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print(f"{_named(sys.argv[1:] if argv is None else argv)}: interrupted", file=sys.stderr)
        return 130
    try:
        return args.run(args) or 0
    except BertdataError as err:
        print(f"bertdata {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except Stopped as stop:
        print(f"bertdata {args.command}: stopped by {stop.name}", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print(f"bertdata {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # whoever read the output stopped (`bertdata inspect ... | head`)
        return 141  # as a shell reports a command that SIGPIPE ended


def _named(argv: list[str]) -> str:
    """The command `argv` names, read before its parser is made: a Ctrl-C while the commands'
    modules load names it as one in the command does."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return f"bertdata {first}" if first in COMMANDS else "bertdata"


def entry() -> None:
    """The console script: `main`, then an exit that neither a late signal nor the interpreter's
    teardown can delay or turn into a kill. Once the command has returned, its outcome is settled
    and its files are closed and in place; the teardown would only free every module loaded
    (Beam's take about half a second, a full collection of their objects included) before the
    process ends, and a Ctrl-C in it ended the process by SIGINT (exit -2, without its one line).
    So the console's output is flushed and the process ends at once."""
    code = main()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe (`bertdata inspect ... | head`): as Python's own exit says it
        code = code or 120
    os._exit(code)


if __name__ == "__main__":
    entry()
