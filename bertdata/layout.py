"""Folder and file names of the text stage and the build's work folder (each format names its own
folders and files: bertdata.formats)."""

from __future__ import annotations

BOOKS_WIKI_DATASET = "books_wiki_en_corpus"
SPLITS = ("training", "test")
# A build's temporary files (run files, progress markers), beside the shard folders and
# named so that no trainer takes them for shards.
WORK_FOLDER = ".bertdata-work"


def text_folder(training_shards: int, test_shards: int, test_fraction: float) -> str:
    return f"sharded_training_shards_{training_shards}_test_shards_{test_shards}_fraction_{test_fraction}"


def shard_stem(dataset: str, split: str, index: int) -> str:
    return f"{dataset}_{split}_{index}"
