"""Folder and file names of the reference pipeline, so NGC scripts find the data unchanged."""

from __future__ import annotations

from bertdata.config import InstanceConfig

BOOKS_WIKI_DATASET = "books_wiki_en_corpus"
SPLITS = ("training", "test")
# A build's temporary files (run files, progress markers), beside the shard folders and
# named so that no trainer takes them for shards.
WORK_FOLDER = ".bertdata-work"


def text_folder(training_shards: int, test_shards: int, test_fraction: float) -> str:
    return f"sharded_training_shards_{training_shards}_test_shards_{test_shards}_fraction_{test_fraction}"


def hdf5_folder(cfg: InstanceConfig, lowercase: bool = True) -> str:
    """The reference's name; whole-word masking adds a suffix, so token folders keep NGC's names
    and the two schemes never share a folder."""
    return (f"hdf5_lower_case_{int(lowercase)}_seq_len_{cfg.max_seq_length}"
            f"_max_pred_{cfg.max_predictions_per_seq}_masked_lm_prob_{cfg.masked_lm_prob}"
            f"_random_seed_{cfg.random_seed}_dupe_factor_{cfg.dupe_factor}"
            f"{'_whole_word_mask' if cfg.masking_scheme == 'whole-word' else ''}")


def shard_stem(dataset: str, split: str, index: int) -> str:
    return f"{dataset}_{split}_{index}"


# NGC's current recipe (run_pretraining.sh with LDDL) reads its phases and vocab from here.
LDDL_VOCAB = "vocab/vocab"


def lddl_folder(phase: int, bin_size: int | None) -> str:
    """pretrain/phase1/unbinned/parquet, pretrain/phase2/bin_size_64/parquet, ..."""
    return f"pretrain/phase{phase}/{'unbinned' if bin_size is None else f'bin_size_{bin_size}'}/parquet"


def megatron_folder(lowercase: bool) -> str:
    """Megatron-LM's indexed datasets (bertdata.megatron): one pair per split, whatever the phases;
    named like the hdf5 folders for the case, since a cased vocab's ids differ."""
    return f"megatron/lower_case_{int(lowercase)}"
