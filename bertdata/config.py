"""Run configuration as frozen dataclasses; the CLI maps flags onto these."""

from __future__ import annotations

from dataclasses import dataclass

from bertdata.errors import BertdataError


@dataclass(frozen=True)
class InstanceConfig:
    """Parameters of the reference MLM/NSP instance algorithm (defaults = phase 1)."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 5
    random_seed: int = 12345

    def __post_init__(self) -> None:
        if self.max_seq_length < 5:
            raise BertdataError(f"--max-seq-length must be at least 5 (got {self.max_seq_length})")
        if not 1 <= self.max_predictions_per_seq <= self.max_seq_length - 3:
            raise BertdataError(
                f"--max-predictions-per-seq must be between 1 and max-seq-length - 3 = "
                f"{self.max_seq_length - 3} (got {self.max_predictions_per_seq})"
            )
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise BertdataError(f"--masked-lm-prob must be in (0, 1) (got {self.masked_lm_prob})")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise BertdataError(f"--short-seq-prob must be in [0, 1] (got {self.short_seq_prob})")
        if self.dupe_factor < 1:
            raise BertdataError(f"--dupe-factor must be at least 1 (got {self.dupe_factor})")
        if self.random_seed < 0:
            raise BertdataError(f"--random-seed must be non-negative (got {self.random_seed})")


PHASE1 = InstanceConfig(max_seq_length=128, max_predictions_per_seq=20)
PHASE2 = InstanceConfig(max_seq_length=512, max_predictions_per_seq=80)


@dataclass(frozen=True)
class TokenizerConfig:
    """Which WordPiece vocab and casing; `vocab=None` means the standard bert-base-uncased vocab."""

    vocab: str | None = None
    lowercase: bool = True
