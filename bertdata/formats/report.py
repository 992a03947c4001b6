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


def from_recipe(folder) -> bool:
    """Whether the build that wrote `folder` (its manifest in it or its parent) read a recipe:
    then every sample's id begins with its corpus's name."""
    import json
    from pathlib import Path

    from bertdata.manifest import MANIFEST

    for manifest in (Path(folder) / MANIFEST, Path(folder).parent / MANIFEST):
        try:
            dump = json.loads(manifest.read_text(encoding="utf-8")).get("dump")
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
        return isinstance(dump, dict) and "recipe" in dump
    return False


def print_removed(report: Report, folder) -> None:
    """What a recipe's dedup and decontamination removed from the build that wrote `folder`: its
    text stage's manifest (beside the format's folders, of the same build) says."""
    import json
    from pathlib import Path

    from bertdata.manifest import MANIFEST

    def load(path: Path) -> dict | None:
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return found if isinstance(found, dict) else None

    ours = next((m for m in (load(Path(folder) / MANIFEST), load(Path(folder).parent / MANIFEST)) if m), None)
    digest = (ours or {}).get("dump", {}).get("sha1")
    for root in list(Path(folder).resolve().parents)[:4]:
        for path in sorted(root.glob(f"sharded_*/*/{MANIFEST}")):
            text = load(path)
            if text and text.get("dump", {}).get("sha1") == digest and "dedup" in text:
                removed = text["dedup"]["removed"]
                report.out(f"  removed by dedup: exact {removed['exact']:,}, near {removed['near']:,}, contaminated "
                           f"{removed['contaminated']:,} ({path.parent / text['dedup']['file']})")
                return


def print_corpora(report: Report, samples) -> None:
    """A recipe's build's figures per corpus, from each sample's (id, length): samples, tokens and
    their share, in the order the corpora first come."""
    figures: dict[str, list[int]] = {}
    for sample_id, length in samples:
        corpus = str(sample_id).split("/", 1)[0]
        figures.setdefault(corpus, [0, 0])
        figures[corpus][0] += 1
        figures[corpus][1] += int(length)
    total = sum(tokens for _, tokens in figures.values()) or 1
    for corpus, (count, tokens) in figures.items():
        report.out(f"  corpus {corpus}: {count:,} samples, {tokens:,} tokens ({tokens / total:.1%})")
