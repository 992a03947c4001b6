"""Inputs and pairs for the text stage's compiled decoder and splitter, shared by their tests and
fuzz targets: bzip2 input full of runs, and punkt's words and spaces beside NLTK's tokenizer."""

from __future__ import annotations

import random

from nltk.tokenize.punkt import PunktSentenceTokenizer

from bertdata.text import _bunzip
from bertdata.text.fastpunkt import FastPunkt
from bertdata.text.sentences import punkt_parameters


def decode_all(data: bytes, sizes: list[int] | None = None) -> bytes:
    bit = level = crc = 0
    parts = []
    while True:
        out, bit, level, crc, _ = _bunzip.decode(data, bit, level, crc)
        if not out and not level and bit == len(data) * 8:
            return b"".join(parts)
        parts.append(out)
        if sizes is not None:
            sizes.append(len(out))


def runs(rng: random.Random, size: int) -> bytes:
    """Text full of runs of every length around the first run-length stage's 4 and 4 + 255."""
    out = bytearray()
    while len(out) < size:
        out += bytes([rng.randrange(256)]) * rng.choice([1, 2, 3, 4, 5, 6, 258, 259, 260, 261, 1000])
        out += bytes(rng.randrange(97, 123) for _ in range(rng.randrange(0, 20)))
    return bytes(out[:size])


def pair(model: str) -> tuple[PunktSentenceTokenizer, FastPunkt]:
    params = punkt_parameters(model)
    return PunktSentenceTokenizer(params), FastPunkt(params)


# Words that exercise punkt's rules: abbreviations of several models, initials, ordinals,
# ellipses, quotes and brackets around marks, sentence starters, collocations, numbers.
SOUP = ("Dr.", "dr.", "U.S.", "Inc.", "e.g.", "i.e.", "etc.", "St.", "Mr.", "No.", "Fig.", "z.", "B.", "u.",
        "ä.", "Nr.", "bzw.", "ca.", "г.", "т.", "е.", "ок.", "av.", "J.-C.", "p.", "ex.", "Sr.", "EE.", "UU.", "np.", "r.",
        "J.", "S.", "a.", "x.", "1990.", "3.", "12.", "5.50.", "1,000.", "-3.", "...", "..", ". . .", "....", "--",
        "The", "the", "However", "however", "He", "he", "It", "in", "and", "Bach", "bach", "Smith", "Der", "die",
        "Und", "Après", "après", "Москва", "москва", "Il", "il", "Él", "él", "word", "Word", "WORD", "x", "1990",
        "(", ")", '"', "'", "[", "]", "{", "}", "«", "»", "„", "“", ",", ";", ":", "?", "!", "?!", ".", "-", "&",
        "#", "*", "@", "`", "(The", "cats)", '"Stop."', "(really.)", "word.)", 'word."', "word.'", "end.]", "x.,",
        "a.b", "well-known", "co.-op.", "Ltd.", "vs.", "Jan.", "Feb.", "jan.", "mt.", "Mt.", "Prof.", "prof.")


SPACES = (" ", " ", " ", " ", "  ", "\u00a0", "\t", " \n", "\n\n", "")
