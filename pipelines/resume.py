"""The text stage's and the per-shard files' resume rules, which their stages
(bertdata.pipelines.stages.text, bertdata.pipelines.stages.instances) decide with.

A finished text stage is reused when its manifest records the same dump and text options;
finished shard files are reused one by one (see bertdata.pipelines.stages.instances). The manifests
are what say a stage finished: they are written last, and atomically.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bertdata.config import TextConfig
from bertdata.errors import BertdataError
from bertdata.formats import PerShardFormat
from bertdata.fsutil import load_json
from bertdata.text.shards import text_folder, TextShard
from bertdata.manifest import MANIFEST, RUN_KEY
from bertdata.instances.vocab import Vocab
from bertdata.pipelines.records import StageRecords, TextPlan
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.runtime.log import note

# The text options' key for the cleaner's rules version: a new release's rules redo the text.
RULES = "cleaning_rules"
# The command that writes a build's manifests (their "tool" record), and takes its lock.
BUILD_TOOL = "bertdata build"


@dataclass(frozen=True)
class StageManifest:
    """A finished stage's folder and the manifest it wrote there."""

    folder: str
    manifest: dict


def read_manifest(folder: str) -> dict | None:
    path = fsio.join(folder, MANIFEST)
    if not fsio.exists(path):
        return None
    try:
        return load_json(fsio.read_bytes(path))
    except ValueError:
        return None  # written atomically, so only a hand edit breaks it: redo the stage


def text_stage_folders(output: str, t: TextConfig, dataset: str) -> list[str]:
    """Every text shard folder this build may write: default shard counts may be halved
    (see bertdata.text.shards.fewer_shards), and the folder is named after the counts."""
    def halvings(n: int) -> list[int]:
        counts = [n]
        while not t.fixed_shards and counts[-1] > 1 and counts[-1] % 2 == 0:
            counts.append(counts[-1] // 2)
        return counts

    return [fsio.join(output, text_folder(n, m, t.test_fraction), dataset)
            for n in halvings(t.training_shards) for m in halvings(t.test_shards)]


def reusable_text_stage(folders: list[str], dump: dict, text_options: dict, force: bool) -> StageRecords | None:
    """What a finished text stage for these inputs in one of `folders` handed on, else None.
    A folder holding another build's text is refused; text of the same dump and options that
    lost shards, or made by older cleaning rules, is rebuilt."""
    finished = [(f, m) for f, m in ((f, read_manifest(f)) for f in folders) if m is not None]
    if force:
        return None
    for folder, manifest in finished:
        if manifest.get("dump", {}).get("sha1") == dump["sha1"] and manifest.get("options") == text_options:
            stage = finished_text_stage(folder, manifest)
            if stage is not None:
                return stage
    for folder, manifest in finished:
        old = manifest.get("options", {})
        made_from = manifest.get("dump", {})
        if made_from.get("sha1") != dump["sha1"]:
            raise BertdataError(f"{folder} holds text shards of another dump ({dump_difference(made_from, dump)}); "
                                "pass --force to rebuild them, or choose another --output")
        if old == text_options:
            note(f"{folder}: text shards listed in its {MANIFEST} are missing: rebuilding them")
        elif {**old, RULES: None} == {**text_options, RULES: None}:
            note(f"{folder}: text shards made with cleaning rules {old.get(RULES)}, now {text_options[RULES]}: "
                 "rebuilding them")
        else:
            raise BertdataError(f"{folder} holds text shards built with other options ({differences(old, text_options)}); "
                                "pass --force to rebuild them, or choose another --output")
    return None


def refuse_another_build(output: str, dump: dict, language: str, vocab: Vocab | None, force: bool) -> None:
    """Refuse, unless `force`, a build into a folder holding a finished build of another dump,
    language or vocab (where this one uses one), naming the difference: a build replaces what its stages write, and its
    stages' own checks see only the folders this build writes (another shard count, language or
    phase writes others), so the first build would be lost, or mixed with this one, unasked."""
    if force:
        return
    for path, manifest in build_manifests(output):
        made_from, options = manifest.get("dump") or {}, manifest.get("options") or {}
        if made_from.get("sha1") != dump["sha1"]:
            difference = f"made from another dump ({dump_difference(made_from, dump)})"
        elif options.get("language", language) != language:
            difference = f"in another language ({options['language']}, now {language})"
        elif vocab is not None and options.get("vocab_sha256", vocab.sha256) != vocab.sha256:
            difference = (f"made with another vocab (sha256 {options['vocab_sha256'][:12]}…, now {vocab.path}, "
                          f"sha256 {vocab.sha256[:12]}…)")
        else:
            continue
        raise BertdataError(f"{output}: holds a finished build {difference} (see {path}); pass --force to build "
                            "over it, or choose another --output")


# How deep below the output folder a build's manifests are looked for: a build writes them at
# most 4 folders down (an LDDL phase folder), and an output given inside a big folder of other
# things must not cost a walk of all of it.
MANIFEST_DEPTH = 6


def build_manifests(output: str) -> list[tuple[str, dict]]:
    """Every manifest `bertdata build` wrote under `output`, whatever the stage or format (not the
    hidden work folder's), with its path, in path order."""
    if fsio.is_local(output):
        paths = []
        for folder, dirs, files in os.walk(output):
            depth = len(Path(folder).relative_to(output).parts)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < MANIFEST_DEPTH else []
            if MANIFEST in files and folder != output:
                paths.append(os.path.join(folder, MANIFEST))
    else:
        paths = [p for p in fsio.match(output.rstrip("/") + "/**")
                 if fsio.split(p)[1] == MANIFEST and "/." not in p[len(output):]]
    found = []
    for path in sorted(paths):
        try:
            manifest = load_json(fsio.read_bytes(path))
        except (OSError, ValueError):
            continue  # not a build's (a build writes its manifests atomically)
        if isinstance(manifest, dict) and (manifest.get("tool") or {}).get("name") == BUILD_TOOL:
            found.append((path, manifest))
    return found


def dump_difference(made_from: dict, dump: dict) -> str:
    """Which dump a folder was made from, and this build's, for a refusal."""
    def named(record: dict) -> str:
        sha1 = record.get("sha1")
        return f"{record.get('name')}, sha1 {sha1[:12]}…" if isinstance(sha1, str) else f"{record.get('name')}"

    return f"{named(made_from)}; this build's is {named(dump)}"


def differences(old: dict, new: dict, prefix: str = "") -> str:
    """The options that differ, as "text.lowercase True, now False; books [], now ['b.txt']"."""
    said = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = differences(a, b, f"{prefix}{key}.")
            if inner:
                said.append(inner)
        elif a != b:
            said.append(f"{prefix}{key} {a!r}, now {b!r}")
    return "; ".join(said)


def finished_text_stage(folder: str, manifest: dict) -> StageRecords | None:
    """What a finished text stage's manifest says it handed on; None where a shard it lists is gone."""
    shards = [TextShard(path=fsio.join(folder, e["file"]), ids="ids" in e, **{k: e[k] for k in
              ("split", "index", "stem", "documents", "sentences", "bytes", "sha256")}) for e in manifest["shards"]]
    if not all(fsio.exists(s.path) and (s.ids_path is None or fsio.exists(s.ids_path)) for s in shards):
        return None
    effective = manifest["effective_shards"]
    return StageRecords(TextPlan(folder, effective["training"], effective["test"]), tuple(shards),
                        manifest["counts"])


def this_runs_text_manifest(output: str, folders: list[str], started: str) -> StageManifest | None:
    """The text stage this run wrote, once it has; the folder's name is decided inside the pipeline."""
    # One listing, not a read per candidate: the progress bars ask every second.
    written = set(fsio.match(fsio.join(output, "sharded_*", "*", MANIFEST)))
    for folder in folders:
        manifest = read_manifest(folder) if fsio.join(folder, MANIFEST) in written else None
        if manifest is not None and manifest.get(RUN_KEY, {}).get("started") == started:
            return StageManifest(folder, manifest)
    return None


def check_vocab_unchanged(fmt: PerShardFormat, phase_dirs: list[str], vocab: Vocab, force: bool) -> None:
    """Refuse to mix shards of two vocabs in one folder (a half-done run, then a new vocab)."""
    if force:
        return
    for folder in phase_dirs:
        for path in fsio.match(fsio.join(folder, fmt.pattern()))[:1]:
            with fsio.local_input(path) as local:
                recorded = fmt.info([local]).attrs.get("vocab_sha256")
            if recorded is not None and recorded != vocab.sha256:
                raise BertdataError(
                    f"{path} was made with another vocab (sha256 {recorded[:12]}…, now {vocab.sha256[:12]}…); "
                    "pass --force to rebuild every shard with the new vocab")
