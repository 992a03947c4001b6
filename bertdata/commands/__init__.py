"""One module per CLI command: `add_parser(subparsers)` registers it and sets `run`;
`options` defines the flags several commands share.

Modules here import only argparse-level things (and the config dataclasses, for
defaults) at import time; the work is imported inside `run`, so `bertdata --help`
and `bertdata inspect` start fast.
"""

COMMANDS = ("download", "build", "instances", "inspect", "shard", "vocab", "bench")
