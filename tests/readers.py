"""Third-party readers of what bertdata writes, each in a virtualenv of its own (testcache.venv),
run on a folder with a script that prints its findings as JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import testcache


STREAMING_CHECK = r'''
import json, sys
from streaming import StreamingDataset
from streaming.base.format import reader_from_json
from streaming.base.util import clean_stale_shared_memory

args = json.load(open(sys.argv[1]))
out = {}
for split in args["splits"]:
    clean_stale_shared_memory()
    ds = StreamingDataset(local=args["root"], split=split, shuffle=False, batch_size=1)
    streamed = [(ds[i]["id"], ds[i]["input_ids"].tolist(), int(ds[i]["len"]), ds[i]["input_ids"].dtype.name)
                for i in range(len(ds))]
    index = json.load(open(f"{args['root']}/{split}/index.json"))
    read = []
    for info in index["shards"]:
        shard = reader_from_json(args["root"], split, info)
        shard.validate(False)
        read += [(shard[j]["id"], shard[j]["input_ids"].tolist()) for j in range(shard.samples)]
    out[split] = {"streamed": streamed, "read": read}
print(json.dumps(out))
'''


# ModernBERT's StreamingTextDataset (`streaming: true`) on an MDS split, as its src/text_data.py reads a
# sample's `input_ids`: the column's buffer taken as int64, whatever dtype streaming decoded it in.
# args: {"reads": [[local, split], ...]}; prints each read's samples (or the error a sample raised).
MODERNBERT_STREAMING_CHECK = r'''
import json, sys
import numpy as np
from streaming import StreamingDataset
from streaming.base.util import clean_stale_shared_memory

args = json.load(open(sys.argv[1]))
out = []
for local, split in args["reads"]:
    clean_stale_shared_memory()
    ds = StreamingDataset(local=local, split=split, shuffle=False, batch_size=1)
    read = []
    for i in range(len(ds)):
        try:
            read.append(np.frombuffer(ds[i]["input_ids"], dtype=np.int64).tolist())
        except ValueError as err:  # "buffer size must be a multiple of element size"
            read.append(str(err))
    out.append(read)
print(json.dumps(out))
'''


DATASETS_CHECK = r'''
import json, sys
import datasets, transformers

args = json.load(open(sys.argv[1]))
out = {}
for how, loaded in (("card", datasets.load_dataset(args["folder"], cache_dir=args["cache"])),
                    ("data_dir", datasets.load_dataset("parquet", data_dir=args["folder"], cache_dir=args["cache"]))):
    columns = {split: loaded[split].to_dict() for split in loaded}
    out[how] = {split: list(zip(c["id"], c["input_ids"])) for split, c in columns.items()}
tokenizer = transformers.BertTokenizerFast(vocab_file=args["vocab"], do_lower_case=True)
collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3, return_tensors="np")
rows = loaded["train"].select(range(min(32, len(loaded["train"])))).to_dict()["input_ids"]
batch = collator([{"input_ids": ids} for ids in rows])
out["batch"] = {"rows": rows, "input_ids": batch["input_ids"].tolist(), "labels": batch["labels"].tolist(),
                "pad": tokenizer.pad_token_id, "mask": tokenizer.mask_token_id}
print(json.dumps(out))
'''


def run_in_venv(name: str, script: str, args: dict, tmp_path: Path, cwd: Path | None = None) -> dict:
    try:
        python = testcache.venv(name)
    except testcache.Unavailable as err:
        pytest.fail(str(err), pytrace=False)
    (tmp_path / "args.json").write_text(json.dumps(args))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(python), "-c", script, str(tmp_path / "args.json")], capture_output=True, text=True,
                          timeout=600, env=env, cwd=cwd or tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
