"""MosaicML Streaming's MDS (bertdata.formats.mds): the bytes read back by hand, the same bytes
whatever order the parts were written in, the size limit, the checks (a truncated file, a wrong
count, a missing file), and the readers that train from it: `mosaicml-streaming` itself
(StreamingDataset and reader_from_json, raw and zstd) and ModernBERT's own loader
(NoStreamingDataset and GreedyBestFitSequencePacker, from its repository)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zstandard

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats import Report, mds
from bertdata.instances.samples import Samples
from conftest import VOCAB, folder_bytes, text_samples
from readers import MODERNBERT_STREAMING_CHECK, STREAMING_CHECK, run_in_venv


def shards(count: int = 3) -> list[Samples]:
    """SHARD_A's samples cut into `count` text shards, named as the build names them."""
    whole = text_samples()
    cuts = np.linspace(0, len(whole), count + 1).astype(int)
    out = []
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        out.append(Samples(f"wikicorpus_en_training_{k}", whole.tokens[whole.offsets[a]:whole.offsets[b]].copy(),
                           whole.offsets[a:b + 1] - whole.offsets[a], whole.document[a:b].copy(),
                           whole.piece[a:b].copy()))
    return out


def write_split(folder: Path, parts: list[Samples], order=None, **options) -> dict:
    """Each part written in `order` (default: as given), then the split finished in the parts' order."""
    work = folder.parent / f".{folder.name}-parts"
    work.mkdir(parents=True, exist_ok=True)
    entries: dict[int, list[dict]] = {}
    for k in order or range(len(parts)):
        entries[k] = mds.write_part(parts[k], work, **options)
    figures = mds.finish_local_split([entries[k] for k in range(len(parts))], work, folder)
    assert not list(work.iterdir())  # every part moved
    work.rmdir()
    return figures


def expected(parts: list[Samples]) -> list[tuple[str, list[int]]]:
    return [(p.sample_id(i), p.sample(i).tolist()) for p in parts for i in range(len(p))]


# ---------------------------------------------------------------- codec and writer


def test_a_shard_read_back_by_hand(tmp_path):
    """Streaming's layout, read with struct alone: count, offsets, the config, each sample's
    column sizes and columns (id, input_ids with its shape byte, len)."""
    parts = shards(1)
    figures = write_split(tmp_path / "train", parts)
    index = json.loads((tmp_path / "train" / "index.json").read_text())
    assert index["version"] == 2 and len(index["shards"]) == 1 == figures["shards"]
    entry = index["shards"][0]
    assert entry["column_names"] == ["id", "input_ids", "len"]
    assert entry["column_encodings"] == ["str", "ndarray:uint16", "int32"]
    assert entry["column_sizes"] == [None, None, 4]
    assert (entry["compression"], entry["zip_data"], entry["hashes"]) == (None, None, ["sha1"])
    data = (tmp_path / "train" / "shard.00000.mds").read_bytes()
    assert entry["raw_data"]["bytes"] == len(data) and entry["raw_data"]["basename"] == "shard.00000.mds"
    n = struct.unpack_from("<I", data)[0]
    assert n == entry["samples"] == len(parts[0]) == figures["samples"]
    offsets = struct.unpack_from(f"<{n + 1}I", data, 4)
    config = data[4 + 4 * (n + 1):offsets[0]]
    assert json.loads(config) == {k: entry[k] for k in ("column_encodings", "column_names", "column_sizes",
                                                         "compression", "format", "hashes", "size_limit",
                                                         "version")}
    assert config == json.dumps(json.loads(config), sort_keys=True).encode()
    assert offsets[-1] == len(data)
    for i, (sample_id, ids) in enumerate(expected(parts)):
        sample = data[offsets[i]:offsets[i + 1]]
        id_size, ids_size = struct.unpack_from("<II", sample)
        assert sample[8:8 + id_size].decode() == sample_id
        array = sample[8 + id_size:8 + id_size + ids_size]
        shape_code = 0 if len(ids) < 256 else 1
        assert array[0] == (1 << 2 | shape_code)
        length = int(np.frombuffer(array, (np.uint8, np.uint16)[shape_code], 1, 1)[0])
        assert length == len(ids)
        assert np.frombuffer(array, np.uint16, offset=1 + (1 << shape_code)).tolist() == ids
        assert struct.unpack_from("<i", sample, 8 + id_size + ids_size)[0] == len(ids)
        assert len(sample) == 8 + id_size + ids_size + 4


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_same_bytes_whatever_order_the_parts_were_written_in(tmp_path, compression):
    parts = shards(3)
    write_split(tmp_path / "a" / "train", parts, compression=compression, size_limit=1 << 14)
    write_split(tmp_path / "b" / "train", parts, order=[2, 0, 1], compression=compression, size_limit=1 << 14)
    a, b = folder_bytes(tmp_path / "a" / "train"), folder_bytes(tmp_path / "b" / "train")
    assert a == b and len(a) > 4
    assert [(s["id"], s["input_ids"].tolist()) for s in mds.read_samples(tmp_path / "a" / "train")] == expected(parts)


def test_the_size_limit_cuts_as_streaming_does(tmp_path):
    """A file ends before the sample that would take it past the limit (its bytes and 4 of offset
    per sample, besides the header); each text shard's files are its own."""
    parts = shards(2)
    limit = 1 << 13
    write_split(tmp_path / "train", parts, size_limit=limit)
    index = json.loads((tmp_path / "train" / "index.json").read_text())["shards"]
    names = sorted(p.name for p in (tmp_path / "train").iterdir())
    assert names == ["index.json"] + [f"shard.{i:05}.mds" for i in range(len(index))]
    assert len(index) > 2 * 4
    for entry in index:
        data = (tmp_path / "train" / entry["raw_data"]["basename"]).read_bytes()
        assert len(data) <= limit or entry["samples"] == 1
        assert np.frombuffer(data, "<u4", entry["samples"] + 1, 4)[-1] == len(data)
    assert sum(e["samples"] for e in index) == sum(map(len, parts))
    # Consecutive files of one text shard: the next sample would have passed the limit.
    samples = expected(parts)
    seen = 0
    for entry, following in zip(index, index[1:]):
        seen += entry["samples"]
        if samples[seen][0].split("/")[0] != samples[seen - 1][0].split("/")[0]:
            continue  # a new text shard starts a new file
        sample = mds.encode_sample(*samples[seen][:1], np.array(samples[seen][1], np.uint16))
        assert entry["raw_data"]["bytes"] + len(sample) + 4 > limit


def test_ids_of_a_large_vocab_are_uint32(tmp_path):
    whole = text_samples()
    big = Samples("wikicorpus_en_test_0", whole.tokens.astype(np.uint32) + 70_000, whole.offsets, whole.document,
                  whole.piece)
    write_split(tmp_path / "val", [big])
    entry = json.loads((tmp_path / "val" / "index.json").read_text())["shards"][0]
    assert entry["column_encodings"][1] == "ndarray:uint32"
    got = list(mds.read_input_ids(tmp_path / "val"))
    assert got[0].dtype == np.uint32 and [g.tolist() for g in got] == [big.sample(i).tolist() for i in range(len(big))]
    assert mds.validate_split(tmp_path / "val", vocab_size=100_000).dtype == "uint32"
    with pytest.raises(ValidationError, match="outside the vocab's 70,000 tokens"):
        mds.validate_split(tmp_path / "val", vocab_size=70_000)


def test_bad_arguments_write_nothing(tmp_path):
    part = shards(1)[0]
    for options, message in [({"compression": "gzip"}, "compression 'gzip'"), ({"size_limit": 1 << 32}, "size limit"),
                             ({"hashes": ("xxh3_64",)}, "hashes")]:
        with pytest.raises(BertdataError, match=message):
            mds.write_part(part, tmp_path, **options)
    with pytest.raises(ValueError, match="int32"):
        mds.write_part(Samples("s", part.tokens.astype(np.int32), part.offsets, part.document, part.piece), tmp_path)
    assert not list(tmp_path.iterdir())


def test_finish_refuses_parts_of_other_settings(tmp_path):
    parts = shards(2)
    a = mds.write_part(parts[0], tmp_path)
    b = mds.write_part(parts[1], tmp_path, compression="zstd")
    with pytest.raises(BertdataError, match="other MDS settings"):
        mds.finish_local_split([a, b], tmp_path, tmp_path / "train")
    assert not (tmp_path / "train" / "index.json").exists() and not list((tmp_path / "train").glob("shard.*"))


def test_zstd_files_are_zstd_frames_of_the_raw_shards(tmp_path):
    parts = shards(2)
    write_split(tmp_path / "raw", parts)
    write_split(tmp_path / "zip", parts, compression="zstd")
    index = json.loads((tmp_path / "zip" / "index.json").read_text())["shards"]
    for i, entry in enumerate(index):
        assert entry["zip_data"]["basename"] == f"shard.{i:05}.mds.zstd"
        assert entry["raw_data"]["basename"] == f"shard.{i:05}.mds"
        raw = zstandard.ZstdDecompressor().decompress((tmp_path / "zip" / entry["zip_data"]["basename"]).read_bytes())
        assert len(raw) == entry["raw_data"]["bytes"]
        assert hashlib.sha1(raw).hexdigest() == entry["raw_data"]["hashes"]["sha1"]
        # The same samples; only the header's config differs, where it names the compression.
        plain = (tmp_path / "raw" / f"shard.{i:05}.mds").read_bytes()
        start = lambda data: struct.unpack_from("<I", data, 4)[0]  # noqa: E731
        assert raw[start(raw):] == plain[start(plain):]
        assert b'"compression": "zstd"' in raw[:start(raw)]
    assert not list((tmp_path / "zip").glob("*.mds"))


# ---------------------------------------------------------------- checks


def broken(tmp_path: Path, fault: str) -> tuple[Path, str]:
    """A valid split with one fault; the file the message must name."""
    folder = tmp_path / "train"
    write_split(folder, shards(2), size_limit=1 << 14)
    shard = folder / "shard.00001.mds"
    index = folder / "index.json"
    if fault == "truncated":
        shard.write_bytes(shard.read_bytes()[:-100])
        return folder, str(shard)
    if fault == "count":
        obj = json.loads(index.read_text())
        obj["shards"][1]["samples"] += 1
        index.write_text(json.dumps(obj, sort_keys=True))
        return folder, str(shard)
    if fault == "missing":
        shard.unlink()
        return folder, str(shard)
    if fault == "bytes":  # same size, other bytes: the recorded sha1 catches it
        data = bytearray(shard.read_bytes())
        data[-3] ^= 1
        shard.write_bytes(bytes(data))
        return folder, str(shard)
    raise AssertionError(fault)


@pytest.mark.parametrize(("fault", "message"), [("truncated", "bytes, but .* says"), ("count", "samples, but the index says"),
                                                ("missing", "missing, but"), ("bytes", "sha1 differs")])
def test_inspect_names_the_fault_in_one_line(tmp_path, fault, message):
    folder, path = broken(tmp_path, fault)
    with pytest.raises(ValidationError, match=message) as err:
        mds.validate_split(folder)
    assert str(err.value).startswith(path) and "\n" not in str(err.value)
    lines = []
    report = Report(out=lines.append)
    mds.MDS.inspect([str(folder)], report)
    assert report.failures == [str(err.value)] and lines == [f"MDS split {folder}: INVALID"]


def edited_index(tmp_path: Path, edit) -> tuple[Path, Path]:
    """A valid split whose index.json's second shard entry `edit` changed (a crafted folder)."""
    folder = tmp_path / "train"
    write_split(folder, shards(2), size_limit=1 << 14)
    index = folder / "index.json"
    obj = json.loads(index.read_text())
    edit(obj["shards"][1])
    index.write_text(json.dumps(obj))
    return folder, index


@pytest.mark.parametrize(("edit", "message"), [
    (lambda e: e["raw_data"].update(bytes="12"), "its raw_data size '12' is not a byte count"),
    (lambda e: e["raw_data"].update(hashes={"shake_128": "00"}), "its raw_data hashes 'shake_128', not one"),
    (lambda e: e.update(raw_data="shard.00001.mds"), "its raw_data names no file of the split folder (None)"),
    (lambda e: e["raw_data"].pop("basename"), "its raw_data names no file of the split folder (None)"),
    (lambda e: e["raw_data"].update(basename="/dev/zero"), "its raw_data names no file of the split folder ('/dev/zero')"),
    (lambda e: e["raw_data"].update(basename="../train/shard.00000.mds"), "names no file of the split folder"),
    (lambda e: e.update(samples="7"), "its sample count '7' is not a whole number"),
    (lambda e: e.update(column_sizes=[None, None]), "are not three lists of one length"),
])
def test_a_crafted_index_is_one_line_naming_it(tmp_path, edit, message):
    folder, index = edited_index(tmp_path, edit)
    lines = []
    report = Report(out=lines.append)
    mds.MDS.inspect([str(folder)], report)
    [failure] = report.failures
    assert failure.startswith(f"{index}: shard 1: ") and message in failure and "\n" not in failure, failure
    assert lines == [f"MDS split {folder}: INVALID"]


def test_a_device_named_as_a_shard_is_not_read(tmp_path):
    folder, index = edited_index(tmp_path, lambda e: None)
    shard = folder / "shard.00001.mds"
    shard.unlink()
    shard.symlink_to("/dev/zero")
    with pytest.raises(ValidationError, match="not a regular file, but .* lists it as a shard file"):
        mds.validate_split(folder)


@pytest.mark.parametrize(("fault", "message"), [
    ("offsets", "too few for the offsets of its"),
    ("config", "the config between the offsets and the samples is not a JSON object"),
])
def test_a_crafted_shard_file_is_one_line_naming_it(tmp_path, fault, message):
    folder = tmp_path / "train"
    write_split(folder, shards(1))
    shard, index = folder / "shard.00000.mds", folder / "index.json"
    data = shard.read_bytes()
    count = struct.unpack_from("<I", data)[0]
    if fault == "offsets":  # the count kept, the offsets cut
        data = data[:8]
    else:  # the header config a list, the offsets moved by its change of length
        offsets = np.frombuffer(data, "<u4", count + 1, 4).astype(np.int64)
        old = data[4 * (count + 2):offsets[0]]
        new = b"[" + b" " * (len(old) - 2) + b"]"
        data = data[:4 * (count + 2)] + new + data[offsets[0]:]
    shard.write_bytes(data)
    obj = json.loads(index.read_text())
    obj["shards"][0]["raw_data"].update(bytes=len(data), hashes={})
    index.write_text(json.dumps(obj))
    with pytest.raises(ValidationError, match=message) as err:
        mds.validate_split(folder)
    assert str(err.value).startswith(str(shard))


@pytest.mark.parametrize("vocab_size", ["30522", 0, True, [1]])
def test_a_manifests_vocab_size_that_is_no_count_is_named(tmp_path, vocab_size):
    write_split(tmp_path / "mds" / "train", shards(1))
    manifest = tmp_path / "mds" / "manifest.json"
    manifest.write_text(json.dumps({"format": "mds", "options": {"vocab_size": vocab_size}}))
    report = Report(out=lambda line: None)
    with pytest.raises(ValidationError, match=f"{manifest}: its vocab_size .* is not a positive whole number"):
        mds.MDS.inspect([str(tmp_path / "mds" / "train")], report)


@pytest.mark.parametrize("fault", ["garbage index", "no index", "no folder"])
def test_a_split_the_manifest_names_is_missed_by_name(tmp_path, fault):
    root = tmp_path / "mds"
    write_split(root / "train", shards(1))
    write_split(root / "val", shards(1))
    (root / "manifest.json").write_text(json.dumps({"format": "mds", "splits": [{"split": "training"},
                                                                                 {"split": "test"}]}))
    if fault == "garbage index":
        (root / "train" / "index.json").write_text("{garbage")
    elif fault == "no index":
        (root / "train" / "index.json").unlink()
    else:
        import shutil

        shutil.rmtree(root / "train")
    assert mds.MDS.find(str(root)) == [str(root / "train"), str(root / "val")]
    report = Report(out=lambda line: None)
    mds.MDS.inspect(mds.MDS.find(str(root)), report)
    [failure] = report.failures
    assert failure.startswith(str(root / "train" / "index.json")), failure


def test_inspect_prints_the_figures(tmp_path):
    parts = shards(2)
    write_split(tmp_path / "mds" / "train", parts)
    write_split(tmp_path / "mds" / "val", shards(1))
    (tmp_path / "mds" / "manifest.json").write_text(json.dumps({"options": {"vocab_size": 30522}}))
    assert mds.MDS.find(str(tmp_path)) == [str(tmp_path / "mds" / "train"), str(tmp_path / "mds" / "val")]
    assert mds.MDS.claims(str(tmp_path / "mds" / "train")) and not mds.MDS.claims(str(tmp_path / "mds"))
    lines = []
    report = Report(out=lines.append, show=1)
    mds.MDS.inspect([str(tmp_path / "mds" / "train")], report)
    tokens = sum(len(p.tokens) for p in parts)
    samples = sum(map(len, parts))
    assert not report.failures
    assert lines[0] == (f"MDS split {tmp_path / 'mds' / 'train'}: 2 shard files (uncompressed), {samples:,} samples, "
                        f"{tokens:,} uint16 tokens, {tokens / samples:.1f} per sample (longest 128)")
    assert lines[1].startswith("  #0 wikicorpus_en_training_0/0/0: [2, ")
    assert mds.MDS.summary("out/mds", {"counts": {"samples": 5, "tokens": 70, "shards": 1}}) == (
        "mds: 5 samples, 70 tokens in 1 shard file -> out/mds")


def test_lddl_and_mds_claim_not_each_others_folders(tmp_path):
    from bertdata.formats import lddl

    write_split(tmp_path / "train", shards(1))
    assert not lddl.LDDL.claims(str(tmp_path / "train")) and lddl.LDDL.find(str(tmp_path)) == []


# ---------------------------------------------------------------- the real readers


@pytest.mark.slow
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_streaming_reads_every_sample(tmp_path, compression):
    """mosaicml-streaming itself, in a virtualenv of its own: StreamingDataset (which decompresses
    zstd shards into its cache) and reader_from_json give every sample, in order, with its id."""
    root = tmp_path / "mds"
    train, val = shards(3), shards(1)
    write_split(root / "train", train, compression=compression, size_limit=1 << 15)
    write_split(root / "val", val, compression=compression, size_limit=1 << 15)
    found = run_in_venv("streaming", STREAMING_CHECK, {"root": str(root), "splits": ["train", "val"]}, tmp_path)
    for split, parts in (("train", train), ("val", val)):
        want = expected(parts)
        assert [tuple(s[:2]) for s in found[split]["streamed"]] == [tuple(w) for w in want]
        assert all(length == len(ids) and dtype == "uint16" for _id, ids, length, dtype in found[split]["streamed"])
        assert [tuple(s) for s in found[split]["read"]] == [tuple(w) for w in want]


MODERNBERT = Path(os.environ.get("BERTDATA_MODERNBERT", "/work/.mirror/AnswerDotAI+ModernBERT/repo"))

# composer, the trainer framework, pins a torch (<2.7.1) that has no CPU wheel here; of it, ModernBERT's
# two modules import a type alias and `Time` (for a batch-size warmup this test does not use) at module
# level, and `dist` for the distributed dataloader this test does not build. These stand in for them.
COMPOSER_STAND_INS = {
    "composer/__init__.py": "",
    "composer/core/__init__.py": "class Time:\n    pass\n",
    "composer/core/types.py": "from typing import Any\nBatch = Any\n",
    "composer/utils/__init__.py": "from . import dist\n",
    "composer/utils/dist.py": "def get_world_size():\n    return 1\n\ndef get_global_rank():\n    return 0\n",
}

MODERNBERT_CHECK = r'''
import json, sys
import numpy as np
import torch
from torch.utils.data import DataLoader
from src.text_data import NoStreamingDataset, DistributedSamplerPCG64DXSM
from src.sequence_packer import GreedyBestFitSequencePacker

args = json.load(open(sys.argv[1]))
ds = NoStreamingDataset(local=args["root"], split="train", max_seq_len=args["seq_len"])
items = [ds[i] for i in range(len(ds))]
sampler = DistributedSamplerPCG64DXSM(ds, num_replicas=1, rank=0, shuffle=True, seed=17)
# As ModernBERT's build_text_dataloader makes them: a device batch of 32 samples of up to 128 ids, in
# micro-batches of 8, packed into rows of 8 x 128 = 1,024 ids.
loader = DataLoader(ds, collate_fn=lambda x: x, batch_size=32, sampler=sampler, num_workers=0)
packer = GreedyBestFitSequencePacker.from_composer(loader, batch_size=32, micro_batch_size=8,
    max_seq_len=args["seq_len"], buffer_size=5 * 32, mask_token_id=args["mask"], pad_token_id=args["pad"],
    mask_prob=0.3, seed=42)
packed, shapes, masked, real = [], set(), 0, 0
for batch in packer:
    ids, labels = batch["input_ids"].numpy(), batch["labels"].numpy()
    shapes.add(tuple(ids.shape))
    original = np.where(labels != -100, labels, ids)
    masked += int((labels != -100).sum())
    real += int(batch["attention_mask"].sum())
    attention = batch["attention_mask"].numpy()
    for row, mask, cu in zip(original, attention, batch["cu_seqlens"]):
        cu = cu.tolist()
        # A row's padding is a last span of its own (cu_seqlens ends at the row's length), masked 0.
        packed += [row[a:b].tolist() for a, b in zip(cu[:-1], cu[1:]) if mask[a:b].any()]
        assert all(mask[a:b].all() or not mask[a:b].any() for a, b in zip(cu[:-1], cu[1:]))
print(json.dumps({"len": len(ds), "items": [[sorted(i), i["input_ids"].tolist()] for i in items],
                  "packed": packed, "shapes": sorted(shapes), "masked": masked, "real": real}))
'''


@pytest.mark.slow
def test_modernbert_packs_batches_from_the_folder(tmp_path):
    """ModernBERT's own NoStreamingDataset reads the raw split (its input_ids, an attention mask;
    `id` and `len` dropped, as it drops every non-array column), and its GreedyBestFitSequencePacker
    packs them into rows of 1,024 ids and masks 30%: unmasked, every packed sequence is one of our
    samples.
    The two modules come from ModernBERT's repository, which no package ships: the test reads them
    from a checkout at $BERTDATA_MODERNBERT (a git repository; default the fetched mirror)."""
    if not MODERNBERT.exists():
        pytest.skip(f"no ModernBERT repository at {MODERNBERT} (set BERTDATA_MODERNBERT to a clone of AnswerDotAI/ModernBERT)")
    code = tmp_path / "code"
    (code / "src").mkdir(parents=True)
    (code / "src" / "__init__.py").write_text("")  # theirs imports the models: only the loader is wanted
    for name in ("src/text_data.py", "src/sequence_packer.py"):
        (code / name).parent.mkdir(parents=True, exist_ok=True)
        (code / name).write_bytes(subprocess.run(["git", "--git-dir", str(MODERNBERT), "show", f"HEAD:{name}"],
                                                 capture_output=True, check=True).stdout)
    for name, text in COMPOSER_STAND_INS.items():
        (code / name).parent.mkdir(parents=True, exist_ok=True)
        (code / name).write_text(text)
    root = tmp_path / "mds"
    parts = shards(2)
    write_split(root / "train", parts)
    from bertdata.instances.vocab import load_vocab

    vocab = load_vocab(VOCAB)
    found = run_in_venv("streaming", MODERNBERT_CHECK, {"root": str(root), "seq_len": 128, "mask": vocab.mask_id,
                                                        "pad": vocab.token_to_id["[PAD]"]}, tmp_path, cwd=code)
    want = expected(parts)
    assert found["len"] == len(want)
    assert [item for item in found["items"]] == [[["attention_mask", "input_ids"], ids] for _id, ids in want]
    assert found["shapes"] == [[4, 1024]]
    from collections import Counter

    packed, samples = Counter(map(tuple, found["packed"])), Counter(tuple(ids) for _id, ids in want)
    assert packed and not packed - samples
    assert sum(packed.values()) > 0.8 * len(want)
    assert 0.25 < found["masked"] / found["real"] < 0.35


def test_the_int64_schema_holds_the_same_ids_as_int64(tmp_path):
    """--mds-schema int64: the default's ids, stored as ndarray:int64, checked by inspect's reader."""
    parts = shards(2)
    write_split(tmp_path / "int64" / "train", parts, schema="int64")
    index = mds.read_index(tmp_path / "int64" / "train")
    assert {tuple(e["column_encodings"]) for e in index} == {("str", "ndarray:int64", "int32")}
    samples = list(mds.read_samples(tmp_path / "int64" / "train"))
    assert [(s["id"], s["input_ids"].tolist()) for s in samples] == [tuple(w) for w in expected(parts)]
    assert {s["input_ids"].dtype.name for s in samples} == {"int64"}
    assert mds.validate_split(tmp_path / "int64" / "train", 30522).dtype == "int64"
    with pytest.raises(BertdataError, match="MDS schema 'int32': one of input_ids, int64, eurobert"):
        mds.write_part(parts[0], tmp_path, schema="int32")


@pytest.mark.slow
def test_modernberts_streaming_reader_takes_the_int64_schema(tmp_path):
    """Read through mosaicml-streaming's StreamingDataset as ModernBERT's StreamingTextDataset reads
    a sample (np.frombuffer(sample["input_ids"], dtype=np.int64)): every sample of the int64 schema
    is our ids; of the default uint16 one, hardly any."""
    parts = shards(2)
    for schema in ("input_ids", "int64"):
        write_split(tmp_path / "mds" / schema / "train", parts, schema=schema)
    reads = [[str(tmp_path / "mds" / schema), "train"] for schema in ("input_ids", "int64")]
    default, int64 = run_in_venv("streaming", MODERNBERT_STREAMING_CHECK, {"reads": reads}, tmp_path)
    want = [ids for _id, ids in expected(parts)]
    assert int64 == want
    assert sum(a == b for a, b in zip(default, want)) < len(want) / 10


def test_the_eurobert_schema_is_tokens_and_metadata(tmp_path):
    """--mds-schema eurobert: EuroBERT's optimus columns (`metadata` json, `tokens` ndarray:int32),
    read back by inspect's reader as every sample's ids and id."""
    parts = shards(2)
    write_split(tmp_path / "eurobert" / "train", parts, schema="eurobert")
    (entry, *_) = mds.read_index(tmp_path / "eurobert" / "train")
    assert (entry["column_names"], entry["column_encodings"], entry["column_sizes"]) == (
        ["metadata", "tokens"], ["json", "ndarray:int32"], [None, None])
    samples = list(mds.read_samples(tmp_path / "eurobert" / "train"))
    assert [(s["id"], s["input_ids"].tolist()) for s in samples] == [tuple(w) for w in expected(parts)]
    assert mds.validate_split(tmp_path / "eurobert" / "train", 30522).dtype == "int32"


# EuroBERT's optimus (optimus/trainer/data.py): MaskingDataset, a StreamingDataset, masks item["tokens"].
EUROBERT_CHECK = r'''
import json, sys
from streaming import StreamingDataset

args = json.load(open(sys.argv[1]))
ds = StreamingDataset(local=args["root"], split="train", shuffle=False, batch_size=1)
print(json.dumps([[ds[i]["metadata"], ds[i]["tokens"].tolist(), ds[i]["tokens"].dtype.name] for i in range(len(ds))]))
'''


@pytest.mark.slow
def test_streaming_reads_the_eurobert_schema_as_optimus_does(tmp_path):
    """Through mosaicml-streaming, as EuroBERT's MaskingDataset takes a sample: `tokens`, int32,
    every sample's ids; `metadata` a dict holding its id."""
    parts = shards(2)
    write_split(tmp_path / "mds" / "train", parts, schema="eurobert")
    found = run_in_venv("streaming", EUROBERT_CHECK, {"root": str(tmp_path / "mds")}, tmp_path)
    assert [(m["id"], ids) for m, ids, _dtype in found] == [tuple(w) for w in expected(parts)]
    assert {dtype for _m, _ids, dtype in found} == {"int32"}


def test_finish_split_does_its_io_through_the_callables(tmp_path):
    """The build's file system layer (s3, gs) does the moves and the index's write: finish_split
    only names. Each part's files, in part order, get the next shard names; the index comes last."""
    parts = shards(2)
    entries = [mds.write_part(p, tmp_path, size_limit=1 << 14, compression="zstd") for p in parts]
    calls = []
    figures = mds.finish_split(entries, lambda old, new: calls.append(("rename", old, new)),
                               lambda name, data: calls.append(("write", name, json.loads(data))))
    renames = [c for c in calls if c[0] == "rename"]
    count = sum(map(len, entries))
    assert [c[1] for c in renames] == [e["zip_data"]["basename"] for part in entries for e in part]
    assert [c[2] for c in renames] == [f"shard.{i:05}.mds.zstd" for i in range(count)]
    assert calls[-1][:2] == ("write", "index.json") and len(calls) == count + 1
    index = calls[-1][2]
    assert [e["raw_data"]["basename"] for e in index["shards"]] == [f"shard.{i:05}.mds" for i in range(count)]
    assert figures["shards"] == count and figures["samples"] == sum(map(len, parts))
    assert figures["zip_bytes"] == sum(e["zip_data"]["bytes"] for e in index["shards"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(c[1] for c in renames)  # nothing moved here


def test_json_nested_past_the_recursion_limit_is_one_line(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    root = tmp_path / "mds"
    write_split(root / "train", shards(1))
    (root / "manifest.json").write_text('{"format": "mds", "options": ' + deep + "}")
    assert mds.MDS.find(str(root)) == [str(root / "train")]  # not a manifest it can read: no split named
    report = Report(out=lambda line: None)
    mds.MDS.inspect([str(root / "train")], report)
    assert not report.failures
    (root / "train" / "index.json").write_text('{"shards": ' + deep + "}")
    with pytest.raises(ValidationError, match="index.json: not a readable JSON index \\(nested too deeply"):
        mds.validate_split(root / "train")
