"""The figures `inspect` prints for any format of instances, in one table style."""

from __future__ import annotations

from bertdata.formats.contract import Report

# The reference pairs about half of its segments at random (a little more: a chunk of one
# segment always is); a share far off means a shard with too few documents.
NSP_TOLERANCE = 0.15
NSP_MIN_INSTANCES = 50


def print_row(report: Report, stats, label: str) -> None:
    r = stats.row()
    report.out(f"{r['instances']:>10} {stats.max_seq_length:>4} {r['mean_real_tokens']:>8.1f} "
               f"{r['short_share']:>6.1%} {r['masked_per_instance']:>6.2f} {r['random_next_share']:>11.1%}  {label}")


def print_words(report: Report, stats, attrs: dict) -> None:
    """How the masks fall on words (see checks.word_masking)."""
    starts = stats.word_starts / max(stats.masked, 1)
    whole = ("every mask covers whole words" if not stats.split_words else
             f"masks cover part of a word in {stats.split_words:,} of {stats.instances:,} instances")
    report.out(f"{'':>10} {attrs.get('masking_scheme', 'token')} masking: {starts:.1%} of masked positions start a "
               f"word; {whole}")
