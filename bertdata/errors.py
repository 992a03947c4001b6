"""Errors the CLI turns into one clear line and an exit code."""


class BertdataError(Exception):
    """A problem the user can fix: bad input, bad flags, a missing file. Exit code 2."""

    exit_code = 2


class ValidationError(BertdataError):
    """A shard that exists but is not a valid shard. Exit code 1, as `inspect` promises."""

    exit_code = 1
