"""The README's how-tos, run as written: their commands and code are read from README.md (never a
copy), with only what a test machine must change: the bundled sample dump in place of a download
of the latest one, the test vocab and a tokenizer trained here in place of the hub's, and a model
and step count small enough for a CPU."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLE_SHARDS, VOCAB, run_cli, trained_tokenizer
from readers import MODERNBERT_STREAMING_CHECK, STREAMING_CHECK, run_in_venv

pytestmark = pytest.mark.slow

README = ROOT / "README.md"


def section(title: str) -> str:
    """The README's paragraphs from the bold `title` to the next bold title."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"**{title}**")
    end = text.find("\n**", start + len(title) + 4)
    return text[start:end if end > 0 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def build_command(text: str) -> list[str]:
    """The how-to's `bertdata build` line, as arguments after `bertdata`, on the bundled sample dump."""
    from bertdata.text.wikidump import sample_paths

    (line,) = [line for block in blocks(text, "bash") for line in block.splitlines() if line.startswith("bertdata build")]
    return [*shlex.split(line)[1:], "--dump", str(sample_paths()[0]), "--phase", "1", *SAMPLE_SHARDS]


def test_the_modernbert_how_to(tmp_path):
    """Its build writes the folder its YAML names; the YAML packs under train_loader and both
    loaders read a split the folder has, at the build's length. Both of ModernBERT's readers take
    every sample of both splits, as they read them through mosaicml-streaming: NoStreamingDataset
    (the YAML's `streaming: false`: reader_from_json's arrays) and StreamingTextDataset (the
    `streaming: true` it names for a bucket: the int64 read of `input_ids`)."""
    import yaml

    from bertdata.formats.mds import read_samples

    text = section("Pretraining ModernBERT on this data.")
    args = build_command(text)
    tokenizer = Path(args[args.index("--tokenizer") + 1])
    (tmp_path / tokenizer).parent.mkdir(parents=True)
    shutil.copy(trained_tokenizer("bpe"), tmp_path / tokenizer)  # a byte-level BPE, as ModernBERT's
    run_cli(*args, cwd=tmp_path)
    (config,) = [yaml.safe_load(block) for block in blocks(text, "yaml")]
    folder = tmp_path / config["data_local"]
    options = json.loads((folder / "manifest.json").read_text())["options"]
    assert config["max_seq_len"] == options["max_seq_length"] and options["schema"] == "int64"
    assert config["train_loader"]["sequence_packing"] is True and "sequence_packing" not in config
    splits = []
    for loader in ("train_loader", "eval_loader"):
        dataset = config[loader]["dataset"]
        assert dataset["local"] == "${data_local}" and dataset["max_seq_len"] == "${max_seq_len}"
        assert (folder / dataset["split"] / "index.json").is_file() and dataset["streaming"] is False
        splits.append(dataset["split"])
    streamed = run_in_venv("streaming", MODERNBERT_STREAMING_CHECK,
                           {"reads": [[str(folder), split] for split in splits]}, tmp_path)
    read = run_in_venv("streaming", STREAMING_CHECK, {"root": str(folder), "splits": splits}, tmp_path)
    for split, as_int64 in zip(splits, streamed):
        ours = [s["input_ids"].tolist() for s in read_samples(folder / split)]
        assert ours and max(map(len, ours)) <= config["max_seq_len"]
        assert as_int64 == ours and [ids for _id, ids in read[split]["read"]] == ours
    assert (folder / "tokenizer.json").read_bytes() == (tmp_path / tokenizer).read_bytes()


# What the test prints once the how-to's code has run: its loader's batch, its trainer's steps.
HF_REPORT = '''
import json
print(json.dumps({"batch": {k: list(v.shape) for k, v in batch.items()}, "rows": len(data["train"]),
                  "columns": data["train"].column_names, "positions": model.config.max_position_embeddings,
                  "longest": max(map(len, data["train"]["input_ids"])), "step": Trainer.last_step}))
'''


def test_the_hugging_face_how_to(tmp_path):
    """Its build and its Python as written (a tiny BERT, 2 steps): `Trainer` trains on the folder's
    rows, the plain loader's batch is masked and padded, no row is longer than BERT's positions."""
    text = section("Training with Hugging Face `transformers`.")
    args = build_command(text)
    run_cli(*args, "--vocab", VOCAB, cwd=tmp_path)
    (code,) = blocks(text, "python")
    hub = tmp_path / "bert-base-uncased"  # the hub's folder, offline: the build's vocab, BERT's tokenizer class
    hub.mkdir()
    shutil.copy(VOCAB, hub / "vocab.txt")
    (hub / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    small = {"BertConfig(vocab_size=tokenizer.vocab_size)":
             "BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, "
             "intermediate_size=64)",
             "max_steps=1000": "max_steps=2", '"bert-base-uncased"': json.dumps(str(hub))}
    for old, new in small.items():
        assert old in code, old
        code = code.replace(old, new)
    # Counts the steps the trainer took, without changing what it does.
    counting = ("from transformers import Trainer\n_train = Trainer.train\n"
                "def _counted(self, *a, **k):\n    out = _train(self, *a, **k)\n    Trainer.last_step = self.state.global_step\n"
                "    return out\nTrainer.train = _counted\n")
    found = run_in_venv("trainer", counting + code + HF_REPORT, {}, tmp_path)
    assert found["step"] == 2 and found["rows"] > 0 and found["columns"] == ["input_ids"]
    assert found["longest"] <= 512 == found["positions"]
    assert set(found["batch"]) == {"input_ids", "attention_mask", "labels"}
    assert found["batch"]["input_ids"][0] == 8 and found["batch"]["input_ids"] == found["batch"]["labels"]
