"""Which of a build's chosen formats each kind of stage writes (bertdata.formats: each format
states how the build cuts it), for the build and its dry run alike."""

from __future__ import annotations

from bertdata import formats
from bertdata.config import BuildConfig


def chosen_format(cfg: BuildConfig, cut: str) -> formats.Format | None:
    """The format among `cfg.formats` that the build cuts so (PER_SHARD, ACROSS_SHARDS,
    PER_SPLIT), or None."""
    return next((fmt for fmt in map(formats.get, cfg.formats) if fmt.cut == cut), None)
