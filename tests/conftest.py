"""Shared fixtures: where the test data lies and CLI helpers.

Every test runs in any clone: the real dump fragments and Google's script come from PyPI into the
test cache (tests/testcache.py; `make test` fetches them first), the text, vocabs and whole-word
goldens are committed under tests/data/ (tests/make_test_data.py remade them), and the reference
instances of token masking are made from them by Google's script at first use.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest

import testcache
from servers import tree_digest
from testcache import TABLE_FRAGMENT, WIKI_FRAGMENT  # noqa: F401 (for the tests)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
# An uncased vocab `bertdata vocab` trained on the fragment, and a cased one on SHARD_A.
VOCAB = DATA / "vocab.txt"
CASED_VOCAB = DATA / "vocab-cased.txt"
# 40 articles of the fragment, cleaned and split into sentences by `bertdata build`.
SHARD_A = DATA / "shard_A.txt"
# Google's (= NVIDIA's) instances for SHARD_A, written as NVIDIA's script writes them: phase 1,
# and phase 2 with dupe factor 2. Made at first use, in a cache folder named by their inputs.
REFERENCES = {"A_s12345_128_20_p15_d5.hdf5": dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=5),
              "A_s12345_512_80_p15_d2.hdf5": dict(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=2)}
_KEY = hashlib.sha256(b"".join(p.read_bytes() for p in (SHARD_A, VOCAB, ROOT / "tests" / "google_bert.py")))
PARITY = testcache.CACHE / "parity" / _KEY.hexdigest()[:16]
PARITY_128, PARITY_512 = (PARITY / name for name in REFERENCES)
# Packaged with bertdata.
SAMPLE_VOCAB = ROOT / "bertdata" / "sample" / "vocab.txt"
# Shard counts for builds of the bundled sample, so that its 34 articles make several shards
# (with a warning).
SAMPLE_SHARDS = ("--training-shards", "8", "--test-shards", "2")

# What could not be fetched, by the file asked for: a missing index is asked once, not per test.
_unavailable: dict[Path, str] = {}


def _make_references() -> None:
    from google_bert import instances, write_reference

    PARITY.mkdir(parents=True, exist_ok=True)
    for name, shape in REFERENCES.items():
        if not (PARITY / name).exists():
            arrays = instances(testcache.GOOGLE_BERT, [SHARD_A], VOCAB, lowercase=True, whole_word=False,
                               masked_lm_prob=0.15, short_seq_prob=0.1, random_seed=12345, **shape)
            write_reference(arrays, PARITY / name)


def need(path: Path) -> Path:
    """`path`, fetched or made where the test cache lacks it; where that cannot be done (no
    package index), a failure of the calling test in one line."""
    path = Path(path)
    references = path == PARITY or path.parent == PARITY
    fetched = testcache.GOOGLE_BERT if references else path
    if fetched not in _unavailable:
        try:
            testcache.ensure(fetched)  # a few stats once the cache holds it
            if references:
                _make_references()
        except testcache.Unavailable as err:
            _unavailable[fetched] = str(err)
    if fetched in _unavailable:
        pytest.fail(_unavailable[fetched], pytrace=False)
    return path


@pytest.fixture(scope="session")
def test_data() -> None:
    """Every file of the test cache, fetched or made."""
    need(WIKI_FRAGMENT)
    need(PARITY)


needs_test_data = pytest.mark.usefixtures("test_data")


@pytest.fixture
def short_tmpdir():
    """A TMPDIR for a build, to see what it leaves there: short, as the worker pool's socket path
    in it must be (about 100 bytes at most)."""
    folder = Path(tempfile.mkdtemp(prefix="bd"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def signals_default() -> None:
    """For `preexec_fn`: a child that a test hangs up or interrupts gets SIGHUP as a closed terminal
    sends it and SIGINT as Ctrl-C does. Under `nohup` every process, this test runner too, starts
    with SIGHUP ignored, and a job a non-interactive shell puts in the background with SIGINT
    ignored; bertdata rightly keeps an ignored signal ignored."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """Run `bertdata ARGS` in a fresh interpreter, as a user would."""
    proc = subprocess.run([sys.executable, "-m", "bertdata.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"bertdata {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def run_script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `scripts/NAME ARGS` with the tests' interpreter, its output captured."""
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def installed(module: str) -> bool:
    """Whether `module` can be imported (found, not imported: cheap at collection)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def needs_extra(extras: str, *modules: str) -> pytest.MarkDecorator:
    """Skip, with one reason line, where a module of the optional `extras` ("bench" or
    "bench,megatron") is not installed: decided at collection, before any fixture builds what
    the test would have read."""
    absent = [m for m in modules if not installed(m)]
    return pytest.mark.skipif(bool(absent), reason=f"{', '.join(absent)} not installed: "
                                                    f"pip install -e '.[{extras}]'")


@functools.lru_cache(maxsize=4)
def text_samples(path: Path = SHARD_A, vocab: Path = VOCAB, max_length: int = 128, dtype=np.uint16,
                 source: str | None = None):
    """A text shard's documents as `Samples` (bertdata.instances.samples, the build's rule), in ids
    of `dtype`, for the formats' tests (made once: do not change its arrays)."""
    from dataclasses import replace

    from bertdata.instances.documents import read_documents
    from bertdata.instances.samples import make_samples
    from bertdata.instances.tokenize import WordPiece
    from bertdata.instances.vocab import load_vocab

    tokenizer = WordPiece(load_vocab(vocab), lowercase=True)
    samples = make_samples(read_documents(path, tokenizer), tokenizer, max_length, source or Path(path).stem)
    return replace(samples, tokens=samples.tokens.astype(dtype))


@pytest.fixture(scope="session")
def tokens() -> tuple[str, ...]:
    """VOCAB's tokens, by id (what rows held as text are decoded with)."""
    from bertdata.instances.vocab import load_vocab

    return load_vocab(need(VOCAB)).tokens


def build_files(root: Path) -> dict[str, bytes]:
    """Every file a build wrote below `root` but its manifests (they record the run) and log."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "build.log")}


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """The bytes of each file in `folder` (not below it), by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# Tokenizer files in each model `tokenizers` offers, with no hub: a RoBERTa-style byte-level BPE
# (<s> ... </s>) and a T5-style Unigram (... </s>) trained on SHARD_A by `tokenizers` itself, and
# `tokenizers`' own BERT WordPiece (BertWordPieceTokenizer) of VOCAB. Kept in the test cache,
# named by their inputs.
TOKENIZER_KINDS = ("bpe", "unigram", "wordpiece")


def trained_tokenizer(kind: str) -> Path:
    """The tokenizer.json of `kind` (one of TOKENIZER_KINDS), made at first use."""
    import tokenizers

    key = hashlib.sha256(b"".join((kind.encode(), tokenizers.__version__.encode(), SHARD_A.read_bytes(),
                                   VOCAB.read_bytes())))
    path = testcache.CACHE / "tokenizers" / f"{kind}-{key.hexdigest()[:16]}" / "tokenizer.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        _make_tokenizer(kind).save(str(partial))
        os.replace(partial, path)
    return path


def _make_tokenizer(kind: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.implementations import BertWordPieceTokenizer

    if kind == "wordpiece":
        return BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    lines = [line for line in SHARD_A.read_text(encoding="utf-8").splitlines() if line.strip()]
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=8000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tokenizer.train_from_iterator(lines, trainer)
        tokenizer.post_processor = processors.RobertaProcessing(
            ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")))
    elif kind == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.normalizer = normalizers.NFKC()
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=4000, special_tokens=["<pad>", "</s>", "<unk>"],
                                          unk_token="<unk>", show_progress=False)
        tokenizer.train_from_iterator(lines, trainer)
        tokenizer.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tokenizer.token_to_id("</s>"))])
    else:
        raise ValueError(f"no tokenizer kind {kind!r}; one of {TOKENIZER_KINDS}")
    return tokenizer

# The build that the object-store tests (s3://, gs://) repeat on their store, and its bytes on local disk.
STORE_BUILD = ("--phase", "1", "--format", "both", "megatron", "--training-shards", "4", "--test-shards", "1")


@pytest.fixture(scope="module")
def local_build(tmp_path_factory):
    need(WIKI_FRAGMENT)
    out = tmp_path_factory.mktemp("local") / "out"
    run_cli("build", "--wiki-only", "--dump", WIKI_FRAGMENT, "--vocab", VOCAB, "--output", out, *STORE_BUILD,
            "--workers", "2")
    return tree_digest(out)

# --- test tiers: `make test-unit` runs what is not marked integration (nor slow) -----------------

# Modules whose every test runs the build end to end, in this process or another, or starts
# servers: integration whatever their fixtures say.
INTEGRATION_MODULES = {
    "test_build", "test_build_lddl", "test_dask", "test_gcs", "test_object_store", "test_parity", "test_faults",
    "test_google_parity", "test_download", "test_pool", "test_stages", "test_plan", "test_gpu_check", "test_bench",
    "test_host_ceiling", "test_plot_performance", "test_build_documents",
    # LDDL folders written and read back from the reference's parity shards
    "test_lddl", "test_lddl_cli",
    # the fuzz targets (a time budget each; `make test-sanitize` runs them too)
    "test_fuzz_bunzip", "test_fuzz_formats", "test_fuzz_instances", "test_fuzz_kept", "test_fuzz_pages",
    "test_fuzz_text"}
# What makes any other test integration: another process started (run_cli: bertdata in a fresh
# interpreter; Popen, or anything else of subprocess: a script or `python -c` is a fresh
# interpreter too), by the test itself, a fixture it uses, or a helper of its module they call.
INTEGRATION_CALLS = {"run_cli", "Popen", "subprocess"}


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested functions and comprehensions
            names |= _names(const)
    return names


def _calls_integration(func, module: types.ModuleType, seen: set) -> bool:
    func = getattr(func, "__wrapped__", func)
    code = getattr(func, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = _names(code)
    if names & INTEGRATION_CALLS:
        return True
    return any(_calls_integration(helper, module, seen) for name in names
               if isinstance(helper := getattr(module, name, None), types.FunctionType)
               and helper.__module__ == module.__name__)


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = getattr(item, "module", None)
        if module is None or item.get_closest_marker("integration"):
            continue
        fixtures = [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs]
        if (module.__name__ in INTEGRATION_MODULES
                or any(_calls_integration(f, sys.modules.get(f.__module__, module), set())
                       for f in (item.function, *fixtures))):
            item.add_marker(pytest.mark.integration)


def pytest_ignore_collect(collection_path, config):
    """With integration tests deselected (`make test-unit`), the modules that hold nothing else
    are not even imported: their imports (Beam, moto, torch) are much of the tier's time."""
    if "not integration" in (config.option.markexpr or "") and collection_path.stem in INTEGRATION_MODULES:
        return True
    return None

