"""Which stage writes each of a build's chosen formats: one kind of stage per cut (bertdata.formats),
none per format, for the build and its dry run alike.

PER_SHARD formats are written by the instance stage where a text shard's instances are made;
PER_SPLIT formats each by a stage of bertdata.pipelines.stages.documents; ACROSS_SHARDS formats by
the stages of bertdata.pipelines.stages.lddl, LDDL's balanced files being the one such cut.
"""

from __future__ import annotations

from types import ModuleType

from bertdata import formats
from bertdata.config import BuildConfig
from bertdata.pipelines.stages import documents, lddl

# The module that plans the stages of the formats of a cut: `plan(fmt, inputs, phases, reused_text)`
# -> its stages, `dry_run(fmt, cfg, phases, dataset, lowercase, training_shards)` -> their lines.
CUT_STAGES: dict[str, ModuleType] = {formats.PER_SPLIT: documents, formats.ACROSS_SHARDS: lddl}


def chosen_formats(cfg: BuildConfig, cut: str) -> list[formats.Format]:
    """The formats among `cfg.formats` that the build cuts so, in the order given."""
    return [fmt for fmt in map(formats.get, cfg.formats) if fmt.cut == cut]


def stage_module(fmt: formats.Format) -> ModuleType | None:
    """The module that plans `fmt`'s own stages, or None (a PER_SHARD format has none)."""
    return CUT_STAGES.get(fmt.cut)
