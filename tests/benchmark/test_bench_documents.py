"""`bertdata bench --data` of a documents folder (mds, parquet) from a real build: masked LM alone
over packed samples, masked at load time by the one masking rule, on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the bench extra (torch) is not installed")

from bertdata import formats  # noqa: E402
from bertdata.benchmark.data import build_loader, next_batch, survey  # noqa: E402
from bertdata.benchmark.model import BertForPretraining, training_flops  # noqa: E402
from bertdata.benchmark.train import make_plan, run  # noqa: E402
from bertdata.config import BenchConfig  # noqa: E402
from bertdata.errors import BertdataError  # noqa: E402
from conftest import SAMPLE_SHARDS, run_cli  # noqa: E402

FOLDERS = ("mds/lower_case_1", "parquet/lower_case_1")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("documents") / "out"
    run_cli("build", "--wiki-only", "--sample", "--output", out, "--phase", "1", *SAMPLE_SHARDS,
            "--format", "mds", "parquet", "--max-seq-length", "128")
    return out


def tiny(data: Path, **kw) -> BenchConfig:
    base = dict(data=str(data), model="tiny", device="cpu", batch_size=8, steps=3, warmup_steps=1, workers=0,
                precision="fp32")
    return BenchConfig(**{**base, **kw})


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_documents_folder_trains_masked_lm_alone_on_packed_samples(built, folder):
    data = built / folder
    recorded = json.loads((data / "manifest.json").read_text())["options"]
    plan = make_plan(tiny(data))
    assert plan.model.vocab_size == recorded["vocab_size"] and plan.model.max_position >= 128
    record = run(tiny(data, workers=1))
    assert record["objective"] == "mlm" and record["mlm_probability"] == 0.3 and record["layout"] == "packed"
    assert record["data_format"] == formats.find([str(data)])[0].format.name
    assert 0 < record["real_tokens"] <= record["tokens"] and np.isfinite(record["final_loss"])
    assert 0.25 < record["masked_tokens"] / record["real_tokens"] < 0.35
    # No pooler or next-sentence head: the masked LM's weights alone.
    with_nsp = sum(p.numel() for p in BertForPretraining(plan.model).parameters())
    assert record["params"] == with_nsp - (128 * 128 + 128) - (128 * 2 + 2)  # tiny's hidden size: 128
    assert record["real_tokens_per_second"] > 0 and record["tflops_per_device"] > 0


def test_masking_takes_thirty_percent_and_never_a_special_token(built):
    data = built / FOLDERS[0]
    shards, reading = survey(data)
    tokens = reading.vocab
    loader = build_loader(shards, reading, 16, 0, 1, 0, 12345, False, packed=True, mlm_probability=0.3)
    batches = iter(loader)
    real = masked = shown_mask = 0
    for _ in range(8):
        batch = next_batch(batches)
        starts = batch.cu_seqlens[:-1].long()
        assert set(batch.input_ids[starts].tolist()) == {tokens.special_ids[0]}  # each row starts with [CLS]
        assert not np.isin(batch.mlm_labels.numpy(), tokens.special_ids).any()
        assert not np.isin(batch.mlm_index.numpy(), starts.numpy()).any()
        real += len(batch.input_ids)
        masked += len(batch.mlm_labels)
        shown_mask += int((batch.input_ids[batch.mlm_index] == tokens.mask_id).sum())
    assert 0.28 < masked / real < 0.32
    assert 0.7 < shown_mask / masked < 0.9  # 80% [MASK], the rest kept or random


def test_the_flops_of_a_step_count_its_real_samples_and_masked_tokens(built):
    cfg = tiny(built / FOLDERS[1], steps=2)
    record = run(cfg)
    plan = make_plan(cfg)
    # Attention over each sample's own length: at least (tokens / rows)^2 per row, at most width x tokens.
    low = training_flops(plan.model, record["real_tokens"], record["real_tokens"] ** 2 / record["sequences"],
                         record["masked_tokens"])
    high = training_flops(plan.model, record["real_tokens"], record["real_tokens"] * plan.seq_len,
                          record["masked_tokens"])
    assert low <= record["flops"] <= high


def test_bad_uses_are_one_line(built, tmp_path):
    data = built / FOLDERS[0]
    with pytest.raises(BertdataError, match="packed rows only"):
        make_plan(tiny(data, padded=True))
    with pytest.raises(BertdataError, match="between 0 and 1"):
        tiny(data, mlm_probability=1.5)
    other = tmp_path / "vocab.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n")
    with pytest.raises(BertdataError, match="is not that of the tokenizer"):
        make_plan(tiny(data, vocab=str(other)))
    manifest = built / FOLDERS[1] / "manifest.json"
    saved = manifest.read_text()
    try:
        options = json.loads(saved)
        options["options"]["tokenizer_sha256"] = "0" * 64
        manifest.write_text(json.dumps(options))
        with pytest.raises(BertdataError, match="give that file with --vocab"):
            make_plan(tiny(built / FOLDERS[1]))
    finally:
        manifest.write_text(saved)


def test_a_tokenizer_files_folder_trains_offline_with_the_file_the_build_put_there(tmp_path, monkeypatch):
    """A --tokenizer build's folder holds its file; bench finds it there by the manifest's sha256,
    offline with an empty cache, or in the cache where the folder lost it."""
    from conftest import trained_tokenizer

    path = trained_tokenizer("bpe")
    out = tmp_path / "out"
    run_cli("build", "--wiki-only", "--sample", "--output", out, "--phase", "1", *SAMPLE_SHARDS,
            "--format", "mds", "--tokenizer", path, "--max-seq-length", "128")
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    data = out / "mds" / path.parent.name
    plan = make_plan(tiny(data))
    assert plan.model.vocab_size == json.loads((data / "manifest.json").read_text())["options"]["vocab_size"]
    assert run(tiny(data, steps=2))["objective"] == "mlm"
    (data / "tokenizer.json").unlink()
    with pytest.raises(BertdataError, match="neither in the folder nor in bertdata's cache"):
        make_plan(tiny(data))
    (cache / "bertdata").mkdir(parents=True)
    (cache / "bertdata" / "my-bpe.json").write_bytes(path.read_bytes())
    assert make_plan(tiny(data)).model.vocab_size == plan.model.vocab_size


@pytest.mark.parametrize("fault, message", [
    ("deep", "not JSON: nested too deeply"),
    ("ids", "token 'd' has id 4,294,967,295"),  # before np.arange of 4e9 ids
    ("zero", "more than 1.0 MB, not a tokenizer file"),
    ("vocab_size", "its vocab_size '30522' is not a positive whole number"),
])
def test_bench_vocab_refuses_a_hostile_tokenizer_or_manifest_in_one_line(tmp_path, monkeypatch, fault, message):
    from bertdata.benchmark.data import document_tokens
    from bertdata.instances import tokenizer_file
    from bertdata.manifest import recorded_options

    monkeypatch.setattr(tokenizer_file, "MAX_FILE_BYTES", 1 << 20)
    path = tmp_path / "tokenizer.json"
    if fault == "deep":
        path.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif fault == "ids":
        path.write_text(json.dumps({"version": "1.0", "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {
            "[UNK]": 0, "a": 1, "b": 2, "c": 3, "d": 2**32 - 1}}}))
    elif fault == "zero":
        path.symlink_to("/dev/zero")
    with pytest.raises(BertdataError) as err:
        if fault == "vocab_size":
            manifest = tmp_path / "manifest.json"
            manifest.write_text(json.dumps({"options": {"vocab_size": "30522"}}))
            document_tokens(recorded_options(manifest), None, str(tmp_path))
        else:
            document_tokens({}, str(path), str(tmp_path))
    assert message in str(err.value) and "\n" not in str(err.value)
