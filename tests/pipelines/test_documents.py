"""The stage of the formats cut per split (bertdata.pipelines.stages.documents) and what the instance
stage hands it: the tokenizer file read once by the launcher, its bytes what every worker
tokenizes with, and the folder named by it in one plain name."""

from __future__ import annotations

import os
import pickle
import threading
from types import SimpleNamespace

import pytest

from bertdata.config import BuildConfig, DocumentConfig
from bertdata.instances.tokenizer_spec import TokenizerSpec
from bertdata.instances.vocab import load_vocab
from bertdata.pipelines.stages.documents import tokenizer_label
from bertdata.pipelines.stages.instances import _MakeInstances
from bertdata.pipelines.stage import BuildInputs
from conftest import VOCAB, trained_tokenizer


def test_workers_tokenize_with_the_bytes_the_launcher_read(tmp_path):
    """The file replaced after the launcher read it: the manifest records the first file's
    sha256, so the samples must be the first file's too."""
    path = tmp_path / "tokenizer.json"
    path.write_bytes(trained_tokenizer("bpe").read_bytes())
    launcher = TokenizerSpec.of_file(path)
    step = _MakeInstances(load_vocab(VOCAB), [], True, False, False, (SimpleNamespace(tokenizer=launcher),))
    path.write_bytes(trained_tokenizer("unigram").read_bytes())
    worker = pickle.loads(pickle.dumps(step))
    opened = []

    def work():  # a thread of its own: nothing opened yet, as in a fresh worker
        worker.setup()
        opened.append(worker.shard_sinks[0].tokenizer.open())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert worker.shard_sinks[0].tokenizer == launcher
    assert opened[0].sha256 == launcher.sha256 and opened[0].kind == "BPE"


def test_one_tokenizer_per_descriptor_per_thread():
    """Equal descriptors (the vocab's, made apart) open one tokenizer in a thread, and a pickled
    one the same again: a shard the phases and a format both take is tokenized once."""
    vocab = load_vocab(VOCAB)
    spec = TokenizerSpec.of_vocab(vocab, True)
    again = pickle.loads(pickle.dumps(TokenizerSpec.of_vocab(vocab, True)))
    assert spec == again and hash(spec) == hash(again) and spec.open() is again.open()
    assert spec != TokenizerSpec.of_vocab(vocab, False) and not spec.is_file
    assert spec.name == os.path.basename(VOCAB)
    other = []
    thread = threading.Thread(target=lambda: other.append(spec.open()))
    thread.start()
    thread.join()
    assert other[0] is not spec.open()


def test_the_build_reads_its_tokenizer_once(tmp_path):
    """A pipe (`--tokenizer <(cat tok.json)`) gives its bytes once: every format, then every
    worker, gets that one reading."""
    fifo = tmp_path / "tokenizer.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(trained_tokenizer("bpe").read_bytes(),))
    writer.start()
    inputs = BuildInputs(BuildConfig(wiki_only=True, documents=DocumentConfig(tokenizer=str(fifo))), *[None] * 10)
    first = inputs.tokenizer_file
    writer.join()
    assert first.is_file and first.open().kind == "BPE" and inputs.tokenizer_file is first
    assert BuildInputs(BuildConfig(wiki_only=True), *[None] * 10).tokenizer_file is None


@pytest.mark.parametrize("path, label", [
    (".../...json", "tokenizer"),  # its stem "..": the folder would be the output itself
    ("/x/roberta-base/tokenizer.json", "roberta-base"),
    ("/x/bpe.v2.json", "bpe.v2"),
    ("/x/my tok\n---\nlicense: mit.json", "my_tok_---_license_mit"),
    ("/x/.hidden.json", "hidden"),
    ("/x/a/../tokenizer.json", "x"),  # /x/tokenizer.json
])
def test_a_tokenizer_files_name_becomes_one_plain_folder_name(path, label):
    assert tokenizer_label(path, True) == label
    assert tokenizer_label(None, False) == "lower_case_0"


@pytest.mark.parametrize("content", ["[1, 2]", '{"options": ' + "[" * 100_000 + "]" * 100_000 + "}"])
def test_a_manifest_that_is_no_object_or_nested_past_the_limit_is_refused_in_one_line(tmp_path, content):
    from bertdata.errors import BertdataError
    from bertdata.pipelines.manifests import recorded_manifest

    manifest = tmp_path / "manifest.json"
    manifest.write_text(content)
    with pytest.raises(BertdataError, match=f"^{manifest}: not a readable JSON manifest; pass --force"):
        recorded_manifest(str(tmp_path), {"manifest.json": str(manifest)}, {}, False, "mds files", "other files")


def test_a_folder_no_text_shard_made_a_token_for_gets_no_manifest(tmp_path):
    """A tokenizer that makes no token of any text shard (its normalizer removes the text's
    script) left a manifest on empty folders, which every later run reused."""
    from bertdata.errors import BertdataError
    from bertdata.formats import SplitSettings, get
    from bertdata.pipelines.stages.documents import SplitOutput, write_manifest
    from bertdata.pipelines.records import SplitPart, StageRecords

    tokenizer = SimpleNamespace(name="tokenizer.json")
    out = SplitOutput(get("mds"), str(tmp_path / "mds"), str(tmp_path / "parts"),
                      SplitSettings("wikicorpus_en", True, tokenizer, 128))
    parts = tuple(SplitPart("mds", split, 0, f"{split}_0.txt", "0" * 64, None, {}) for split in ("training", "test"))
    with pytest.raises(BertdataError, match="tokenizer.json\\) made no token of any text shard; nothing is written"):
        write_manifest(StageRecords(None, parts, {"articles": 34}), None, out, {})
    assert not (tmp_path / "mds").exists()
