"""Training a BERT WordPiece vocab with Hugging Face `tokenizers`, deterministically.

`tokenizers`' trainer is not deterministic on its own: its `limit_alphabet` cut is made
over a hash map, so characters tied in count at the cut are kept or dropped at random,
and it numbers the `##x` continuation characters in hash-map order, and those numbers
break ties between equally frequent merges. So the alphabet is chosen here (by count,
ties broken by code point) and handed over as the trainer's whole initial alphabet, and
every `##x` is registered up front in a fixed order; the merges then come out the same
on every run.
"""

from __future__ import annotations

import contextlib
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece as WordPieceModel
from tokenizers.trainers import WordPieceTrainer
from tqdm import tqdm

from bertdata.config import VocabConfig
from bertdata.errors import BertdataError
from bertdata.fsutil import atomic_path, check_output_path, input_errors, temp_name
from bertdata.instances.tokenize import MAX_CHARS_PER_WORD
from bertdata.instances.vocab import SPECIAL_TOKENS

# Lines normalised per call into Rust while counting characters.
_COUNT_BATCH = 4096


@dataclass(frozen=True)
class VocabSummary:
    tokens: int
    alphabet: int
    distinct_characters: int
    lines: int
    articles: int  # from --dump sources; 0 when training on text files only


def bert_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """BERT's normalisation, the same as `bertdata.instances.tokenize` applies when encoding."""
    return normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase
    )


class CharacterCounter:
    """Counts the characters of normalised text the way the trainer's alphabet sees them."""

    def __init__(self, lowercase: bool) -> None:
        self._normalizer = bert_normalizer(lowercase)
        self._pending: list[str] = []
        self.counts: Counter[str] = Counter()
        self.lines = 0

    def add(self, line: str) -> None:
        self._pending.append(line)
        self.lines += 1
        if len(self._pending) >= _COUNT_BATCH:
            self.flush()

    def add_lines(self, lines: list[str]) -> None:
        self.flush()
        self.lines += len(lines)
        self.counts.update(self._normalizer.normalize_str("".join(lines)))

    def flush(self) -> None:
        if self._pending:
            self.counts.update(self._normalizer.normalize_str("\n".join(self._pending)))
            self._pending.clear()

    def alphabet(self, limit: int) -> list[str]:
        """The `limit` most frequent non-space characters, ties broken by code point."""
        self.flush()
        chars = sorted((c for c in self.counts if not c.isspace()), key=lambda c: (-self.counts[c], c))
        return chars[:limit]


def _continues_words(char: str) -> bool:
    """Whether `char` can occur inside a word after BERT pre-tokenization: punctuation and
    CJK ideographs always stand alone, so they never need a `##` form."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return False
    if unicodedata.category(char).startswith("P"):
        return False
    cjk = (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
    )
    return not any(lo <= cp <= hi for lo, hi in cjk)


def train_wordpiece(files: list[str], alphabet: list[str], config: VocabConfig) -> list[str]:
    """Token list (id order) of a WordPiece vocab trained on text files: the special tokens,
    the alphabet, its `##` continuations, then the learned pieces in the order learned."""
    continuations = ["##" + c for c in sorted(alphabet) if _continues_words(c)]
    tokenizer = Tokenizer(WordPieceModel(unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS_PER_WORD))
    tokenizer.normalizer = bert_normalizer(config.lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = WordPieceTrainer(
        vocab_size=config.size,
        min_frequency=config.min_frequency,
        # Registered as specials only to fix their ids; they are ordinary tokens in the file.
        special_tokens=list(SPECIAL_TOKENS) + continuations,
        # With the whole chosen alphabet given as initial alphabet and the limit set to its
        # size, the trainer drops exactly the characters outside it.
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tokenizer.train(files, trainer)
    ids = tokenizer.get_vocab(with_added_tokens=True)
    trained = sorted(ids, key=ids.__getitem__)
    if [ids[t] for t in trained] != list(range(len(trained))) or trained[: len(SPECIAL_TOKENS)] != list(SPECIAL_TOKENS):
        raise BertdataError("internal error: trained vocab ids are not 0..N-1 with the special tokens first")
    rest = trained[len(SPECIAL_TOKENS) + len(continuations):]
    return list(SPECIAL_TOKENS) + rest[: len(alphabet)] + continuations + rest[len(alphabet):]


def _count_text_file(path: str, counter: CharacterCounter) -> None:
    """Read one sentence file through the counter, checking it is readable UTF-8 text."""
    try:
        with input_errors(path, "input file"):
            size = os.path.getsize(path)
            with open(path, encoding="utf-8") as f, tqdm(
                total=size, unit="B", unit_scale=True, desc=f"reading {os.path.basename(path)}", leave=False,
                disable=None,  # no bar when stderr is not a terminal: it would fill a log with \r lines
            ) as bar:
                while lines := f.readlines(1 << 20):
                    counter.add_lines(lines)
                    bar.update(sum(map(len, lines)))
    except UnicodeDecodeError as err:
        raise BertdataError(f"{path}: not UTF-8 text (bad byte at offset {err.start} of a read block)") from None


def dump_sentences(dump: str, counts: Counter) -> Iterator[tuple[str, ...]]:
    """The sentences of each kept article of a dump, cleaned and split as the pipeline does;
    `counts` collects the pipeline's page counters."""
    from bertdata.text.articles import page_document
    from bertdata.text.sentences import default_splitter
    from bertdata.text.wikidump import iter_pages
    from bertdata.text.skipped import DEFAULT_MAX_CHARS

    splitter = default_splitter()
    for page in tqdm(iter_pages(dump), desc=f"cleaning {os.path.basename(dump)}", unit=" pages", leave=False,
                     disable=None):
        document = page_document(page, splitter, DEFAULT_MAX_CHARS, counts)
        if document is not None:
            yield document.sentences


def _write_dump_text(dumps: list[str], path: Path, counter: CharacterCounter) -> int:
    """Clean and split the dumps' articles into `path`, one sentence per line; returns the article count."""
    counts: Counter = Counter()
    with open(path, "w", encoding="utf-8") as out:
        for dump in dumps:
            for sentences in dump_sentences(dump, counts):
                for sentence in sentences:
                    counter.add(sentence)
                    out.write(sentence + "\n")
    return counts["articles"]


def build_vocab(
    inputs: Iterable[str | os.PathLike],
    output: str | os.PathLike,
    config: VocabConfig,
    dumps: Iterable[str | os.PathLike] = (),
    force: bool = False,
) -> VocabSummary:
    """Train a WordPiece vocab on sentence files and/or dumps and write it to `output` atomically."""
    inputs = [os.fspath(p) for p in inputs]
    dumps = [os.fspath(p) for p in dumps]
    if not inputs and not dumps:
        raise BertdataError("nothing to train on: give text files (one sentence per line) or --dump PATH")
    output = check_output_path(output, force=force, inputs=[*inputs, *dumps])
    counter = CharacterCounter(config.lowercase)
    for path in inputs:
        _count_text_file(path, counter)
    files = list(inputs)
    articles = 0
    dump_text = temp_name(output.with_name(output.name + ".sentences"))
    try:
        if dumps:
            articles = _write_dump_text(dumps, dump_text, counter)
            files.append(os.fspath(dump_text))
        alphabet = counter.alphabet(config.limit_alphabet)
        if not alphabet:
            raise BertdataError("no text to train on: the inputs hold no characters outside white space")
        tokens = train_wordpiece(files, alphabet, config)
    finally:
        with contextlib.suppress(FileNotFoundError):
            dump_text.unlink()
    with atomic_path(output) as tmp:
        tmp.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return VocabSummary(
        tokens=len(tokens),
        alphabet=len(alphabet),
        distinct_characters=sum(1 for c in counter.counts if not c.isspace()),
        lines=counter.lines,
        articles=articles,
    )
