"""A recipe's corpora resolved before any output is made: the recipe read and checked, each
corpus's files listed and each file checked by its type (columns, keys, that it opens), and the
build's record of what it reads, which every manifest holds and a re-run compares."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from bertdata import corpora
from bertdata.corpora.recipe import Recipe, load_recipe
from bertdata.dedup.evals import DecontaminateConfig, EvalTable, type_of
from bertdata.errors import BertdataError
from bertdata.fsutil import input_errors
from bertdata.pipelines.runtime import fsio


@dataclass(frozen=True)
class EvalFile:
    """One evaluation file of decontaminate:, as read and checked."""

    path: str
    type: str
    text: str | None  # its text column or key
    sha1: str
    short: int  # its rows of fewer words than the n-gram (not checked)
    name: str  # as the audit and manifest name it: relative to the recipe, as a digest does

    def opened(self) -> tuple:
        """What bertdata.dedup.evals.EvalTable takes of it."""
        return self.path, self.type, self.text, fsio.read_bytes(self.path)


@dataclass(frozen=True)
class Corpora:
    """A recipe and the files of each of its corpora."""

    recipe: Recipe
    files: dict  # corpus name -> its files, sorted
    sizes: dict  # file -> bytes
    base: str = ""  # the recipe's folder
    parts: dict = field(default_factory=dict)  # corpus name -> its files' parts: (file, start, end, bytes), ...
    evals: tuple[EvalFile, ...] = ()  # decontaminate:'s files, in recipe order

    def wikipedia(self):
        """The recipe's wikipedia corpus, if it has one."""
        return next((c for c in self.recipe.corpora if getattr(corpora.get(c.type), "reads_dump", False)), None)

    def record(self) -> dict:
        """What the build reads, as the manifests' `dump` record states a dump: its name, a digest
        (of the recipe and of every file's path and size: corpora of terabytes are not hashed
        whole) and its size."""
        digest = hashlib.sha1()
        digest.update(repr(sorted(self.recipe.record().items())).encode())
        for name in self.recipe.names:
            for path in self.files[name]:
                # Relative to the recipe: the same corpora copied elsewhere (to a store) are the same build.
                shown = _relative(path, self.base)
                digest.update(f"{name}\0{shown}\0{self.sizes[path]}\n".encode())
        for entry in self.evals:  # small files: hashed whole, so an edited one is another build
            digest.update(f"eval\0{entry.sha1}\n".encode())
        return {"name": fsio.split(self.recipe.path)[1], "date": "recipe", "sha1": digest.hexdigest(),
                "bytes": sum(self.sizes.values()), "recipe": self.recipe.record(),
                "files": {name: len(self.files[name]) for name in self.recipe.names}}


def read_recipe(path: str) -> Recipe:
    if not fsio.exists(path):
        raise BertdataError(f"{path}: recipe file not found")
    with input_errors(path, "recipe"):
        data = fsio.read_bytes(path)
    return load_recipe(path, data)


def store_paths(path: str | None) -> tuple[str, ...]:
    """The paths on an object store that a recipe's corpora name outright (what a relative path
    names lies where the recipe does), for the stores' set-up before any file is read."""
    if path is None:
        return ()
    recipe = read_recipe(path)
    evals = [f for e in recipe.decontaminate.against for f in e.files] if recipe.decontaminate is not None else []
    return tuple(p for spec in recipe.corpora for p in (*spec.files, spec.index) if p and not fsio.is_local(p)) + \
        tuple(p for p in evals if not fsio.is_local(p))


def resolve_corpora(path: str) -> Corpora:
    """The recipe at `path` and its corpora's files, every file checked."""
    recipe = read_recipe(path)
    base = fsio.split(path)[0] if "/" in path.replace("\\", "/") else ""
    files, sizes, parts = {}, {}, {}
    for spec in recipe.corpora:
        ctype = corpora.get(spec.type)
        found = ctype.files(spec, lambda pattern: _match(pattern, base))
        parts[spec.name] = []
        for file in found:
            with input_errors(file, f"corpus {spec.name}'s file"):
                sizes[file] = fsio.size(file)
                parts[spec.name] += [(file, *part) for part in ctype.parts(spec, file, fsio.open_file, sizes[file])]
        files[spec.name] = tuple(found)
    return Corpora(recipe, files, sizes, base, parts, eval_files(recipe.decontaminate, base, f"{recipe.path}: decontaminate:"))


def eval_files(decontaminate: DecontaminateConfig | None, base: str, where: str) -> tuple:
    """The evaluation files of a recipe's decontaminate: (named relative to its folder `base`) or of
    --decontaminate (`base` ""), each read and its rows checked (a file without text, a missing key:
    one line naming it), before any output is made; `where` begins the line of a pattern that
    matches nothing."""
    if decontaminate is None:
        return ()
    read = []
    for entry in decontaminate.against:
        for pattern in entry.files:
            paths = _match(pattern, base)
            if not paths:
                raise BertdataError(f"{where} no evaluation file matches {pattern}")
            for path in paths:
                with input_errors(path, "evaluation file"):
                    read.append((path, type_of(path, entry.type), entry.text, fsio.read_bytes(path)))
    table = EvalTable(decontaminate.ngram, read)
    return tuple(EvalFile(path, kind, text, hashlib.sha1(data).hexdigest(), short, _relative(path, base))
                 for (path, kind, text, data), short in zip(read, table.short))


def _relative(path: str, base: str) -> str:
    """`path` relative to the recipe's folder `base`, where it lies under it."""
    return path[len(base):].lstrip("/") if base and path.startswith(base) else path


def _match(pattern: str, base: str) -> list[str]:
    """A pattern's files: an absolute path or URL as it is; a relative one from the recipe's folder,
    else from the current folder."""
    if not fsio.is_local(pattern) or os.path.isabs(pattern) or not base:
        return fsio.match(pattern)
    return fsio.match(fsio.join(base, pattern)) or fsio.match(pattern)
