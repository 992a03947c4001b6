"""NLTK punkt's sentence boundaries, found without NLTK's per-token objects: the same spans.

`PunktSentenceTokenizer.tokenize` looks at every `.`, `?` and `!` followed by a space or
a punctuation mark, cuts out a short context around it (the word before, the mark, the
word after), splits that context into words with its word regex, wraps each word in a
`PunktToken` and runs its two annotation passes through chains of generators. The
decision is a function of the context string alone, but making it costs more than the
rest of cleaning a page.

`FastPunkt` takes the same steps in the same order (the candidate regex, the look-back
for the word before, the overlap rule, the word regex, both annotation passes, the
realignment of closing brackets and quotes) in C (`_scan.punkt_sentences`, `_punkt.h`) over
the str's own code points, making a Python string only for a type the model is asked
about; a context spanning lines, which `split_article` never makes, goes to NLTK itself.
Every rule is NLTK's (nltk.tokenize.punkt, 3.9), rule for rule; tests compare the two on
real text of several languages and on generated text full of punkt's hard cases.
"""

from __future__ import annotations

from nltk.tokenize.punkt import (
    _ORTHO_BEG_LC,
    _ORTHO_LC,
    _ORTHO_MID_UC,
    _ORTHO_UC,
    PunktParameters,
    PunktSentenceTokenizer,
)

from bertdata.text._scan import punkt_sentences

_FLAGS = (_ORTHO_LC, _ORTHO_MID_UC, _ORTHO_UC, _ORTHO_BEG_LC)


class FastPunkt:
    """`PunktSentenceTokenizer(params).tokenize(text)`, faster, with the same result."""

    def __init__(self, params: PunktParameters) -> None:
        self._nltk = PunktSentenceTokenizer(params)
        # Plain sets and a dict, as the C code wants them. NLTK reads the model's defaultdict,
        # which grows by a key on every unseen word; these are read with get, which does not.
        self._abbrev = set(params.abbrev_types)
        self._collocations = set(params.collocations)
        self._starters = set(params.sent_starters)
        self._ortho = dict(params.ortho_context)

    def tokenize(self, text: str) -> list[str]:
        # All of NLTK's steps run in C (_scan.c, _punkt.h); a context that spans lines goes
        # back to NLTK, which annotates it line by line.
        return punkt_sentences(text, self._abbrev, self._collocations, self._starters, self._ortho,
                               self._nltk.text_contains_sentbreak, _FLAGS)
