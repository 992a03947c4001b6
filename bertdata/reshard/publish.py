"""`bertdata shard`'s output folder: the temporary folder the parts are made in (and those that
killed runs left), the free-space check, digests, and the final move of the parts into place
with their manifest. Nothing reaches --output under its final name before it is complete."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

from bertdata.errors import BertdataError
from bertdata.estimate import free_bytes, size_text
from bertdata.fsutil import atomic_path, load_json, make_output_folder, owner_gone, remove_made, this_process
from bertdata.manifest import MANIFEST, file_sha256, write_manifest
from bertdata.reshard.inputs import PART_PATTERN

# The temporary folder inside --output, and the file in it naming the process that owns it.
# No temporary name contains "train": NGC's loader takes every file whose name contains
# "training", PaddleNLP's every one containing "train", hidden ones too.
TEMP_PREFIX = ".bertdata-shard-"
OWNER = "owner.json"


def check_free_space(output: Path, needed: int) -> None:
    """Refuse, once the inputs are known good and before anything is written in it, an output
    folder that cannot be made or hold files (the checks every command's output gets:
    bertdata.fsutil), or where the temporary files cannot fit. The folder is made, as the
    temporary folder is made in it next; one made here is removed again when it is refused."""
    made = make_output_folder(str(output))
    free = free_bytes(str(output))
    if needed > free:
        remove_made(made)
        raise BertdataError(f"{output}: the temporary files need about {size_text(needed)}, but only "
                            f"{size_text(free)} is free there; free some space or choose another --output")


def existing_outputs(output: Path) -> list[Path]:
    """Earlier parts or manifest in `output` -- what a run would overwrite or make inconsistent."""
    if not output.is_dir():
        return []
    return sorted(p for p in output.iterdir() if p.name == MANIFEST or PART_PATTERN.match(p.name))


def stale_parts(output: Path, name: str, split_word: str, keep: set[str]) -> list[Path]:
    """Parts of an earlier run that the new set does not replace: our name beyond the new N,
    and whatever the old manifest lists."""
    stale = {p for p in existing_outputs(output) if (m := PART_PATTERN.match(p.name))
             and (m["name"], m["split"]) == (name, split_word) and p.name not in keep}
    manifest = output / MANIFEST
    if manifest.exists():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            for entry in load_json(manifest.read_text())["parts"]:
                part = output / Path(entry["file"]).name
                if part.name not in keep and part.exists():
                    stale.add(part)
    return sorted(stale)


def make_temp_folder(output: Path) -> str:
    try:
        output.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=output)
        # Whole or not at all: another run finding the folder reads whose it is.
        with atomic_path(Path(tmp, OWNER)) as owner:
            owner.write_text(json.dumps(this_process()))
    except OSError as err:
        raise BertdataError(f"{output}: cannot write the parts there ({err.strerror or err})") from None
    return tmp


def remove_dead_temp_folders(output: Path) -> list[str]:
    """Remove the temporary folders that runs killed outright (SIGKILL, power loss) left in
    `output`; never one whose run may still be going. Returns a line for each folder seen."""
    notes = []
    for folder in sorted(output.glob(TEMP_PREFIX + "*")) if output.is_dir() else []:
        try:
            owner = load_json((folder / OWNER).read_text())
        except (OSError, ValueError):
            owner = None
        if owner_gone(owner):
            shutil.rmtree(folder, ignore_errors=True)
            notes.append(f"removed {folder}, left by a run that was killed (pid {owner['pid']})")
        elif isinstance(owner, dict):
            notes.append(f"left {folder} alone: it belongs to pid {owner.get('pid')} on host "
                         f"{owner.get('host')}, which may still be running")
        else:
            notes.append(f"left {folder} alone: it does not say which run made it; remove it "
                         "yourself if no `bertdata shard` is writing to this folder")
    return notes


def sha256_of(path: str) -> str:
    """A file's sha256; for an LDDL folder, the sha256 of its files' "sha256  name" lines, sorted by name."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return file_sha256(f)
    lines = []
    for entry in sorted(Path(path).iterdir()):
        if entry.is_file() and entry.name != MANIFEST:
            with open(entry, "rb") as f:
                lines.append(f"{file_sha256(f)}  {entry.name}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())
    return os.path.getsize(path)


def input_digests(paths: list[str], stop: threading.Event) -> list[str]:
    digests = []
    for path in paths:
        if stop.is_set():
            break
        digests.append(sha256_of(path))
    return digests


def publish(tmp: Path, output: Path, part_files: dict[str, str], stale: list[Path], tool: dict,
            manifest: dict) -> list[Path]:
    """Move the complete parts into `output`, drop `stale` earlier parts, write the manifest.

    The old manifest goes first: a crash midway leaves a folder without a manifest, never one
    whose manifest does not match its parts."""
    with contextlib.suppress(FileNotFoundError):
        (output / MANIFEST).unlink()
    for temp_name, part_file in part_files.items():
        os.replace(tmp / temp_name, output / part_file)
    for path in stale:
        path.unlink()
    write_manifest(output / MANIFEST, manifest, tool)
    return stale
