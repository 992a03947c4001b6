"""NLTK punkt's sentence boundaries, found without NLTK's per-token objects: the same spans.

`PunktSentenceTokenizer.tokenize` looks at every `.`, `?` and `!` followed by a space or
a punctuation mark, cuts out a short context around it (the word before, the mark, the
word after), splits that context into words with its word regex, wraps each word in a
`PunktToken` and runs its two annotation passes through chains of generators. The
decision is a function of the context string alone, but making it costs more than the
rest of cleaning a page.

`FastPunkt` takes the same steps in the same order (the candidate regex, the look-back
for the word before, the overlap rule, the realignment of closing brackets and quotes) in
C (`_scan.punkt_sentences`), which also decides the commonest context, a word of letters,
a period and a word, by NLTK's rules over plain strings. Any other context comes back
here, where NLTK's own word regex splits it and the same rules decide it without token
objects; one spanning lines, which `split_article` never makes, goes to NLTK itself.
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
    PunktToken,
)

from bertdata.text._scan import punkt_sentences

_NUMERIC = PunktToken._RE_NUMERIC
_ELLIPSIS = PunktToken._RE_ELLIPSIS
_INITIAL = PunktToken._RE_INITIAL
_NUMBER = "##number##"
_FLAGS = (_ORTHO_LC, _ORTHO_MID_UC, _ORTHO_UC, _ORTHO_BEG_LC)


class FastPunkt:
    """`PunktSentenceTokenizer(params).tokenize(text)`, faster, with the same result."""

    def __init__(self, params: PunktParameters) -> None:
        self._nltk = PunktSentenceTokenizer(params)
        lang = self._nltk._lang_vars
        self._words = lang._word_tokenizer_re()
        self._sent_end = frozenset(lang.sent_end_chars)
        self._punctuation = frozenset(PunktSentenceTokenizer.PUNCTUATION)
        # Plain sets and a dict, as the C code wants them. NLTK reads the model's defaultdict,
        # which grows by a key on every unseen word; these are read with get, which does not.
        self._abbrev = set(params.abbrev_types)
        self._collocations = set(params.collocations)
        self._starters = set(params.sent_starters)
        self._ortho = dict(params.ortho_context)

    def tokenize(self, text: str) -> list[str]:
        # The scan for marks, the look-back for the word before, the overlap rule, the
        # decisions for a word of letters, a period and a word, and the realignment run in C
        # (_scan.c, the same steps as NLTK's); any other context comes back to `_general`.
        return punkt_sentences(text, self._abbrev, self._collocations, self._starters, self._ortho,
                               self._general, _FLAGS)

    def _general(self, context: str) -> bool:
        if "\n" in context:
            return self._nltk.text_contains_sentbreak(context)
        return self._contains_break(context)

    def _contains_break(self, context: str) -> bool:
        """NLTK's `text_contains_sentbreak` on a one-line context: does a word other than the
        last end a sentence after both annotation passes?"""
        words = self._words.findall(context)
        firsts = [self._first_pass(word) for word in words]
        for i in range(len(words) - 1):
            word, first = words[i], firsts[i]
            if not word.endswith("."):
                if first == 1:
                    return True
                continue
            following, following_first = words[i + 1], firsts[i + 1]
            next_typ = _NUMERIC.sub(_NUMBER, following.lower())
            if following_first == 1:
                next_typ = _type_no_period(next_typ)
            typ = _type_no_period(_NUMERIC.sub(_NUMBER, word.lower()))
            if self._reclassify(first, typ, _INITIAL.match(word) is not None, following, next_typ):
                return True
        return False

    def _first_pass(self, word: str) -> int:
        """NLTK's `_first_pass_annotation`: 0 plain, 1 sentence break, 2 abbreviation, 3 ellipsis."""
        if word in self._sent_end:
            return 1
        if _ELLIPSIS.match(word):
            return 3
        if word.endswith(".") and not word.endswith(".."):
            lower = word[:-1].lower()
            if lower in self._abbrev or lower.split("-")[-1] in self._abbrev:
                return 2
            return 1
        return 0

    def _reclassify(self, first: int, typ: str, initial: bool, following: str, next_typ: str) -> bool:
        """Whether a word ending in a period ends a sentence after NLTK's `_second_pass_annotation`
        with the word after it: `first` its first-pass annotation, `typ` its type without the
        period, `initial` whether it is one; `next_typ` the next word's type, less a period
        that breaks."""
        # Collocation heuristic.
        if (typ, next_typ) in self._collocations:
            return False
        # An abbreviation or ellipsis ends a sentence too before a likely sentence start.
        if first >= 2 and not initial:
            starts = self._ortho_heuristic(following, next_typ)
            if starts is True:
                return True
            if following[0].isupper() and next_typ in self._starters:
                return True
        # Initials and ordinals.
        if initial or typ == _NUMBER:
            starts = self._ortho_heuristic(following, next_typ)
            if starts is False:
                return False
            if (starts is None and initial and following[0].isupper()
                    and not (self._ortho.get(next_typ, 0) & _ORTHO_LC)):
                return False
        return first == 1

    def _ortho_heuristic(self, word: str, typ: str) -> bool | None:
        """NLTK's `_ortho_heuristic`: does `word` start a sentence (None: not sure)."""
        if word in self._punctuation:
            return False
        ortho = self._ortho.get(typ, 0)
        if word[0].isupper() and ortho & _ORTHO_LC and not ortho & _ORTHO_MID_UC:
            return True
        if word[0].islower() and (ortho & _ORTHO_UC or not ortho & _ORTHO_BEG_LC):
            return False
        return None


def _type_no_period(typ: str) -> str:
    return typ[:-1] if len(typ) > 1 and typ[-1] == "." else typ
