"""NLTK punkt's sentence boundaries, found without NLTK's per-token objects: the same spans.

`PunktSentenceTokenizer.tokenize` looks at every `.`, `?` and `!` followed by a space or
a punctuation mark, cuts out a short context around it (the word before, the mark, the
word after), splits that context into words with its word regex, wraps each word in a
`PunktToken` and runs its two annotation passes through chains of generators. The
decision is a function of the context string alone, but making it costs more than the
rest of cleaning a page.

`FastPunkt` takes the same steps in the same order (the candidate regex, the look-back
for the word before, the overlap rule, the realignment of closing brackets and quotes)
and decides each context with NLTK's own regexes over plain strings; the commonest one,
a word of letters, a period and a word, without even those. A context spanning lines,
which `split_article` never makes, goes to NLTK itself. Every decision rule below is
NLTK's (nltk.tokenize.punkt, 3.9), rule for rule; tests compare the two on real text of
several languages and on generated text full of punkt's hard cases.
"""

from __future__ import annotations

import re

from nltk.tokenize.punkt import (
    _ORTHO_BEG_LC,
    _ORTHO_LC,
    _ORTHO_MID_UC,
    _ORTHO_UC,
    PunktParameters,
    PunktSentenceTokenizer,
    PunktToken,
)

# NLTK looks back for the word before a mark over `string.whitespace` only, not Unicode's.
_ASCII_SPACES = " \t\n\r\x0b\x0c"
_RARE_SPACES = re.compile("[\t\n\r\x0b\x0c]")
_NUMERIC = PunktToken._RE_NUMERIC
_ELLIPSIS = PunktToken._RE_ELLIPSIS
_INITIAL = PunktToken._RE_INITIAL
_NUMBER = "##number##"
# Marks the word regex splits off the end of a word as a word of their own.
_CLOSING = frozenset(",;:)]}\"'([{*@?!")


class FastPunkt:
    """`PunktSentenceTokenizer(params).tokenize(text)`, faster, with the same result."""

    def __init__(self, params: PunktParameters) -> None:
        self._nltk = PunktSentenceTokenizer(params)
        lang = self._nltk._lang_vars
        self._candidates = lang.period_context_re()
        self._words = lang._word_tokenizer_re()
        self._realign = lang.re_boundary_realignment
        self._sent_end = frozenset(lang.sent_end_chars)
        self._punctuation = frozenset(PunktSentenceTokenizer.PUNCTUATION)
        self._abbrev = params.abbrev_types
        self._collocations = params.collocations
        self._starters = params.sent_starters
        # NLTK reads a defaultdict, which grows by a key on every unseen word; .get does not.
        self._ortho = params.ortho_context

    def tokenize(self, text: str) -> list[str]:
        return [text[start:stop] for start, stop in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        return self._realigned(text, self._slices(text))

    def _slices(self, text: str) -> list[tuple[int, int]]:
        """NLTK's `_slices_from_text` with `_match_potential_end_contexts` inlined."""
        slices = []
        last_break = 0
        rare_spaces = _RARE_SPACES.search(text) is not None
        rfind = text.rfind
        previous = None  # the last candidate not yet decided: (match, word start)
        prev_start = prev_stop = 0
        for match in self._candidates.finditer(text):
            at = match.start()
            # The last whitespace between the previous candidate and this one; NLTK's
            # look-back returns 0 both for none and for one at the very first position.
            if rare_spaces:
                space = max(rfind(c, prev_stop, at) for c in _ASCII_SPACES)
            else:
                space = rfind(" ", prev_stop, at)
            start = space + 1 if space > prev_stop else prev_start
            if previous is not None and prev_stop <= start:
                last_break = self._decide(text, previous, prev_start, slices, last_break)
            previous, prev_start, prev_stop = match, start, at
        if previous is not None:
            last_break = self._decide(text, previous, prev_start, slices, last_break)
        slices.append((last_break, len(text.rstrip())))
        return slices

    def _decide(self, text: str, match: re.Match, start: int, slices: list, last_break: int) -> int:
        """Append the sentence `match` ends, if it ends one; the next sentence's start."""
        at = match.start()
        following = match.group("next_tok")
        word = text[start:at]
        breaks = None
        if following is not None and word.isalpha() and text[at] == ".":
            breaks = self._plain_break(word, following)
        if breaks is None:
            # NLTK's context: the word before, the mark and what follows, which are adjacent.
            context = text[start:match.end("after_tok")]
            if "\n" in context:
                breaks = self._nltk.text_contains_sentbreak(context)
            else:
                breaks = self._contains_break(context)
        if not breaks:
            return last_break
        slices.append((last_break, match.end()))
        return match.start("next_tok") if following else match.end()

    def _plain_break(self, word: str, following: str) -> bool | None:
        """`_contains_break("<word>. <following>")` for a word of letters alone, whose words are
        then "<word>." and `following`, less one closing mark; None for other `following`."""
        if following.isalpha():
            next_typ, following_first = following.lower(), 0
        elif following[:-1].isalpha():
            if following[-1] == ".":
                following_first = self._first_pass(following)
                next_typ = following.lower()
                if following_first == 1:
                    next_typ = next_typ[:-1]
            elif following[-1] in _CLOSING:
                following = following[:-1]
                next_typ, following_first = following.lower(), 0
            else:
                return None
        else:
            return None
        typ = word.lower()
        first = 2 if typ in self._abbrev else 1  # no hyphen in it to split at
        # Letters only: never a number; an initial if one letter.
        return self._reclassify(first, typ, len(word) == 1, following, next_typ)

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

    def _realigned(self, text: str, slices: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """NLTK's `_realign_boundaries`: closing quotes and brackets after a sentence's mark
        join that sentence."""
        spans = []
        realign = 0
        last = len(slices) - 1
        for k, (start, stop) in enumerate(slices):
            start += realign
            if k == last:
                if start < stop:
                    spans.append((start, stop))
                break
            next_start, next_stop = slices[k + 1]
            # Matching within bounds is matching the slice: the pattern has no `^` or look-behind.
            m = self._realign.match(text, next_start, next_stop)
            if m:
                spans.append((start, next_start + len(m.group(0).rstrip())))
                realign = m.end() - next_start
            else:
                realign = 0
                if start < stop:
                    spans.append((start, stop))
        return spans


def _type_no_period(typ: str) -> str:
    return typ[:-1] if len(typ) > 1 and typ[-1] == "." else typ
