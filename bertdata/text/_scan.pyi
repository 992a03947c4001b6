"""Signatures of the sentence splitter's compiled scans (_scan.c)."""

from collections.abc import Callable

def punkt_sentences(text: str, abbrev: set[str], collocations: set[tuple[str, str]], starters: set[str],
                    ortho: dict[str, int], general: Callable[[str], bool],
                    flags: tuple[int, int, int, int]) -> list[str]:
    """NLTK punkt's sentences of `text` with the model's abbreviation types, collocations,
    sentence starters and orthographic contexts (`flags`: NLTK's _ORTHO_LC, _ORTHO_MID_UC,
    _ORTHO_UC, _ORTHO_BEG_LC); `general(context)` decides a context other than a word of
    letters, a period and a word (see bertdata/text/fastpunkt.py)."""

def tidy_sentences(pieces: list[str]) -> list[str]:
    """A paragraph's sentences from punkt's `pieces`: each `" ".join(piece.split())`; a piece
    without a `\\w` character is glued onto the sentence before it, or dropped if it is the
    first (or empty)."""

def sentence_stats(sentences: tuple[str, ...]) -> tuple[int, int, int]:
    """(characters, words, unterminated sentences) of `sentences`: words are counted as spaces
    plus one per non-empty sentence; a sentence is unterminated unless its last character is one
    of `.!?"'` U+201D U+2019 `)]`."""
