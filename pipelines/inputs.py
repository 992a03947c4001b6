"""What a build reads: the dump (given, fetched or downloaded), its index, its record for the
manifests, its wiki, the vocab, the books, and the sentence splitter for the dump's language."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, replace

from bertdata.text.books import SNIFF_BYTES, check_text_file
from bertdata.config import BuildConfig
from bertdata.download.digests import file_identity, known_sha1, remember_sha1
from bertdata.errors import BertdataError
from bertdata.fsutil import input_errors
from bertdata.text.languages import dump_language
from bertdata.text.sentences import splitter_for
from bertdata.instances.vocab import Vocab, default_vocab_cached, load_vocab, resolve_vocab
from bertdata.text.wikidump import Site
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.work import open_raw

_DUMP_DATE = re.compile(r"-(\d{8}|latest)-")


@dataclass(frozen=True)
class Inputs:
    """What a build reads: the dump, its index, its record for the manifest, its wiki, the vocab
    (None where no format uses it: `uses_vocab`)."""

    dump: str
    index: str | None
    record: dict
    site: Site
    vocab: Vocab | None


def uses_vocab(cfg: BuildConfig) -> bool:
    """Whether the build reads the WordPiece vocab: every format does but those cut per split,
    which take --tokenizer's file in its place where one is given."""
    from bertdata import formats
    from bertdata.formats import PER_SPLIT

    return cfg.documents.tokenizer is None or any(formats.get(name).cut != PER_SPLIT for name in cfg.formats)


def resolve_inputs(cfg: BuildConfig, fetch_vocab: bool = True) -> Inputs:
    """`fetch_vocab` False (a dry run): a default vocab not in the cache yet is not downloaded (None)."""
    from bertdata.text import wikidump

    if cfg.sample:
        dump, index, sample_vocab = (str(p) for p in wikidump.sample_paths())
        vocab = _vocab(cfg, "en") if cfg.vocab or not uses_vocab(cfg) else load_vocab(sample_vocab)
        return _inputs(dump, index, None, wikidump.read_site(dump, cfg.lang, open_raw), vocab)
    if cfg.dump is None:
        from bertdata.download.dumps import DumpSpec

        # The vocab first: offline without one, fail before a download of hours.
        vocab = _vocab(cfg, dump_language(f"{cfg.wiki}-", None, cfg.lang))
        got = download(DumpSpec(wiki=cfg.wiki, date=cfg.date, mirror=cfg.mirror), fsio.join(cfg.output, "download"))
        record = {"name": os.path.basename(got["dump"]["path"]), "date": got["date"],
                  "source": got["mirror"], "sha1": got["dump"]["sha1"], "bytes": got["dump"]["bytes"]}
        dump = got["dump"]["path"]
        return _inputs(dump, got["index"]["path"], record, wikidump.read_site(dump, cfg.lang, open_raw), vocab)
    dump = cfg.dump
    if re.match(r"https?://", dump):
        dump = _fetched(dump, fsio.join(cfg.output, "download"))
    if not fsio.exists(dump):
        raise BertdataError(f"{dump}: dump file not found")
    index = cfg.index or _index_beside(dump)
    if index is not None and not fsio.exists(index):
        raise BertdataError(f"{index}: multistream index not found")
    with input_errors(dump, "dump file"):
        site = wikidump.read_site(dump, cfg.lang, open_raw)
    return _inputs(dump, index, None, site, _vocab(cfg, site.language, fetch_vocab))


def resolve_recipe(cfg: BuildConfig, fetch_vocab: bool = True):
    """A recipe build's inputs: its corpora (every file listed and checked), its wikipedia
    corpus's dump where it has one, the build's record of what it reads, the vocab (as
    `resolve_inputs` resolves it)."""
    from bertdata.pipelines.corpora import resolve_corpora
    from bertdata.text import wikidump
    from bertdata.text.wikitext import markup_for

    found = resolve_corpora(cfg.recipe)
    wiki = found.wikipedia()
    record = found.record()
    if wiki is None:
        language = found.recipe.corpora[0].language
        site = Site(language, {}, markup_for(language))
        dump = index = None
    else:
        dump = found.files[wiki.name][0]
        index = wiki.index or _index_beside(dump)
        if index is not None and not fsio.exists(index):
            raise BertdataError(f"{index}: multistream index not found")
        with input_errors(dump, "dump file"):
            site = wikidump.read_site(dump, None, open_raw)
        dump_record = _dump_record(dump, index)
        record = {**record, "sha1": hashlib.sha1(f"{record['sha1']}\0{dump_record['sha1']}".encode()).hexdigest(),
                  "dump": dump_record}
    record = {**record, "wiki": site.siteinfo.get("dbname"), "language": site.language}
    return Inputs(dump, index, record, site, _vocab(cfg, site.language, fetch_vocab)), found


def _vocab(cfg: BuildConfig, language: str, fetch: bool = True) -> Vocab | None:
    """The vocab at --vocab's path (wherever it is stored), else the language's default; None,
    neither read nor downloaded, where no format uses it, or where it would be downloaded and
    `fetch` is False."""
    path = cfg.vocab
    if not uses_vocab(cfg) or (path is None and not fetch and not default_vocab_cached(language)):
        return None
    if path is None or fsio.is_local(path):
        return resolve_vocab(path, language)
    if not fsio.exists(path):
        raise BertdataError(f"{path}: vocab file not found")
    with fsio.local_input(path) as local:
        return replace(load_vocab(local), path=path)


def download(spec, folder: str, force: bool = False) -> dict:
    """`bertdata.download.dumps.download_dump` into `folder`, local or on an object store. To a store,
    each file is fetched into a local temporary folder, verified, then copied up; one already
    there is kept once its bytes match the published sha1 (read back to check)."""
    from bertdata.download.dumps import download_dump

    if fsio.is_local(folder):
        return download_dump(spec, folder, force=force)

    def present(name: str, sha1: str) -> dict | None:
        path = fsio.join(folder, name)
        if not fsio.exists(path):
            return None
        with fsio.open_file(path) as f:
            found = _sha1(f, f"sha1 of {name}")[0]
        if found == sha1:
            return {"path": path, "bytes": fsio.size(path)}
        if not force:
            raise BertdataError(f"{path} exists but its sha1 is {found}, not the published {sha1}; remove it, or "
                                "pass --force to download it again")
        return None

    with tempfile.TemporaryDirectory(prefix="bertdata-download-") as staging:
        record = download_dump(spec, staging, force=force, present=present)
        for role in ("dump", "index"):
            local = record[role]["path"]
            if fsio.is_local(local):
                record[role]["path"] = fsio.join(folder, os.path.basename(local))
                fsio.upload(local, record[role]["path"])
    return record


def _fetched(url: str, folder: str) -> str:
    """Where the file at `url` is kept in `folder` (local or on a store), fetched unless there."""
    from bertdata.download.fetch import fetch

    path = fsio.join(folder, url.rstrip("/").rsplit("/", 1)[-1])
    if fsio.is_local(path):
        os.makedirs(folder, exist_ok=True)
        return str(fetch(url, path))
    if fsio.exists(path):
        return path
    with tempfile.TemporaryDirectory(prefix="bertdata-download-") as staging:
        fsio.upload(str(fetch(url, os.path.join(staging, fsio.split(path)[1]))), path)
    return path


def _inputs(dump: str, index: str | None, record: dict | None, site: Site, vocab: Vocab | None) -> Inputs:
    record = {**(record or _dump_record(dump, index)), "wiki": site.siteinfo.get("dbname"),
              "language": site.language}
    return Inputs(dump, index, record, site, vocab)


def _index_beside(dump: str) -> str | None:
    if "-multistream" not in dump:
        return None
    candidate = re.sub(r"(-multistream)\.xml(\.bz2)?$", r"\1-index.txt.bz2", dump)
    return candidate if candidate != dump and fsio.exists(candidate) else None


def _dump_record(dump: str, index: str | None) -> dict:
    """Name, date and sha1 (what Wikimedia publishes) of a dump given as a path."""
    local = fsio.is_local(dump)
    with input_errors(dump, "dump file"):
        sha1 = known_sha1(dump) if local else None
        if sha1 is not None:
            size = os.path.getsize(dump)
        else:
            identity = file_identity(dump) if local else None
            with open_raw(dump) as f:
                sha1, size = _sha1(f)
            if local:
                remember_sha1(dump, sha1, identity)
    name = fsio.split(dump)[1]
    date = _DUMP_DATE.search(name)
    return {"name": name, "date": date.group(1) if date else "unknown", "sha1": sha1,
            "bytes": size, "index": fsio.split(index)[1] if index else None}


def _sha1(f, what: str = "sha1 of dump") -> tuple[str, int]:
    """The sha1 and size of what the file object `f` holds."""
    from tqdm import tqdm

    digest = hashlib.sha1()
    size = 0
    with tqdm(desc=what, unit="B", unit_scale=True, leave=False, disable=None) as bar:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
            bar.update(len(block))
    return digest.hexdigest(), size


def list_books(folder: str | None) -> list[str]:
    if not folder:
        return []
    books = [p for p in fsio.match(fsio.join(folder, "*")) if not fsio.split(p)[1].startswith(".")]
    if not books:
        raise BertdataError(f"{folder}: no book files found (expected plain-text files, one book each)")
    for path in books:
        with fsio.open_file(path) as f:
            check_text_file(path, f.read(SNIFF_BYTES))
    return books


def sentence_splitter(punkt, dump: str, site: Site, kind: str):
    """The sentence splitter `punkt` names, of `kind` (config.SPLITTERS); punkt trained on the
    dump's first articles for a language without a model of its own."""
    from bertdata.text.articles import article_texts
    from bertdata.text.wikidump import iter_pages

    if punkt.model is not None:
        return splitter_for(punkt, kind=kind)
    with contextlib.closing(iter_pages(dump, open_raw)) as pages:
        return splitter_for(punkt, article_texts(pages, site.markup), kind)


def corpus_splitter(language: str, punkt_language: str | None, kind: str):
    """The sentence splitter of a recipe's corpora in `language`: its punkt model (or
    --punkt-language's); a language without one is refused, as no dump is there to train on."""
    from bertdata.text.sentences import choose_punkt

    punkt = choose_punkt(language, punkt_language)
    if punkt.model is None:
        raise BertdataError(f"language {language}: NLTK's punkt has no model for it; pass --punkt-language with "
                            "a neighbour's (e.g. russian for Bulgarian)")
    return splitter_for(punkt, kind=kind)
