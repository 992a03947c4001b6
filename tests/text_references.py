"""The text stage's compiled passes against the Python they replaced: differential tests that each
seed one random.Random and compare on its draws. Collected where they are imported (test_wikitext,
test_sentences); test_fuzz_text runs them again on fresh seeds."""

from __future__ import annotations

import re

import pytest


def test_tidied_prose_is_the_passes_it_replaced():
    """`_prose.tidy_prose` against the regexes and replaces the cleaner used before it."""
    import random

    from bertdata.text._prose import tidy_prose

    odd = re.compile(r"[\t\r\f\v\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
    invisible = re.compile(r"[\u200b-\u200f\u00ad\ufeff]+")
    empty_parens = re.compile(r"\((?: ?[,;:.\u2013\u2014-])* ?\)")
    open_separator = re.compile(r"\([ ,;:]++")
    close_separator = re.compile(r"(?<![ ,;:])[ ,;:]++\)")
    space_before_punct = re.compile(r" (?=[,;:!?)\]]|\.(?!\.))")

    def squeeze(text: str) -> str:
        text = odd.sub(" ", invisible.sub("", text))
        while "  " in text:
            text = text.replace("  ", " ")
        return text.replace(" \n", "\n").replace("\n ", "\n").strip(" ")

    def before(text: str) -> str:
        text = squeeze(text)
        text = close_separator.sub(")", open_separator.sub("(", text))
        text = space_before_punct.sub("", empty_parens.sub("", text)).replace("[]", "")
        while ",," in text:
            text = text.replace(",,", ",")
        return squeeze(text)

    alphabet = [" ", " ", "\n", "\t", "\r", "\f", "\v", "\u00a0", "\u2000", "\u2009", "\u200a", "\u200b",
                "\u200c", "\u200f", "\u2010", "\u202f", "\u205f", "\u3000", "\u00ad", "\ufeff", "\u1680", "\x85",
                "\u2028", "a", "é", "Ж", "中", "😀", ".", "-", "(", ")", ",", ";", ":", "!", "?", "[", "]", "\u2013",
                "\u2014", "..", ",,"]
    rng = random.Random(7)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert tidy_prose(text) == before(text), repr(text)


def test_simple_links_resolve_as_the_regex_and_callback_did():
    """`_markup.resolve_simple_links` against the pattern and per-link callback it replaced."""
    import random

    from bertdata.text._markup import resolve_simple_links
    from bertdata.text.wikitext import ENGLISH, _link_text

    simple_link = re.compile(r"\[\[([^\[\]]*)\]\]")
    alphabet = ["[[", "]]", "[", "]", "|", ":", "#", " ", "\t", "\u00a0", "\u2003", "\n", "a", "é", "中", "😀",
                "File:", "en:", "wikt:", "Paris, Texas", " (god)", "Category:"]
    rng = random.Random(11)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        expected = simple_link.sub(lambda m: _link_text(m.group(1), ENGLISH.drop_link), text)
        assert resolve_simple_links(text, lambda inner: _link_text(inner, ENGLISH.drop_link)) == expected, repr(text)


def test_template_spans_are_the_python_matcher_they_replaced():
    """`_markup.template_spans` (through `remove_templates`) against the Python brace-run matcher
    and name check that `templates` used before it."""
    import random

    from bertdata.text.skipped import MAX_EXPAND_DEPTH, MAX_TEMPLATE_NAME
    from bertdata.text.templates import _EXPANDABLE, _expand, remove_templates, splice

    def render(text: str, start: int, end: int, children: list) -> str | None:
        if text.startswith("{{{", start):
            return None
        head_end = min(end - 2, start + 2 + MAX_TEMPLATE_NAME)
        bar = text.find("|", start + 2, head_end)
        if bar < 0 and head_end < end - 2:
            return None
        name = text[start + 2:bar if bar >= 0 else head_end].strip().lower().replace("_", " ")
        if name not in _EXPANDABLE and not name.startswith("lang-"):
            return None
        pieces, pos = [], start
        for child_start, child_end, shown in children:
            pieces += [text[pos:child_start], shown or ""]
            pos = child_end
        return _expand("".join(pieces) + text[pos:end], name)

    def before(text: str) -> str:
        stack: list[list] = []
        spans: list = []
        for m in re.finditer(r"\{\{+|\}\}+", text):
            run = m.end() - m.start()
            if text[m.start()] == "{":
                stack.append([m.start(), run, []])
                continue
            pos = m.start()
            while run >= 2 and stack:
                top = stack[-1]
                take = 3 if top[1] >= 3 and run >= 3 else 2
                top[1], run, pos = top[1] - take, run - take, pos + take
                if top[1] < 2:
                    stack.pop()
                    shown = render(text, top[0], pos, top[2]) if len(stack) < MAX_EXPAND_DEPTH else None
                    (stack[-1][2] if stack else spans).append((top[0], pos, shown))
            if run >= 2:
                spans.append((pos, m.end(), None))
        blank_after = -1
        for start, _, children in stack:
            spans.extend(children)
            if start >= blank_after:
                blank = text.find("\n\n", start)
                blank_after = len(text) if blank < 0 else blank
                spans.append((start, blank_after, None))
        return splice(text, spans)

    alphabet = ["{{", "}}", "{", "}", "{{{", "}}}", "{{{{{", "}}}}}", "|", "a", " ", "\u00a0", "\n", "\n\n", "lang-fr",
                "LANG-", "Lang", "nowrap", "convert", "1=", "=", "[[", "]]", "frac", "As_of", "\u0130", "cite", "e", "x|y"]
    rng = random.Random(3)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        assert remove_templates(text, "T") == before(text), repr(text)
    deep = "{{lang-fr|" * (MAX_EXPAND_DEPTH + 2) + "mot" + "}}" * (MAX_EXPAND_DEPTH + 2)
    assert remove_templates(deep, "T") == before(deep)


def test_stripped_tags_are_the_python_loop_they_replaced():
    """`_markup.strip_tags` (through `_strip_tags`) against the regex loop the cleaner used before it."""
    import random

    from bertdata.text import wikitext as w

    tag = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)\b([^<>]*)>")

    def before(text: str) -> str:
        out, pos, for_scan, next_close = [], 0, 0, {}
        while m := tag.search(text, for_scan):
            closing, name, attrs = m.group(1), m.group(2).lower(), m.group(3)
            if attrs.strip(" \t\n/") and ("=" not in attrs or attrs[0] not in " \t\n/"):
                for_scan = m.start() + 1
            elif name in w._DROP_CONTENT_TAGS:
                out.append(text[pos:m.start()])
                if name in w._BLOCK_TAGS and "inline" not in attrs:
                    out.append("\n\n")
                pos = for_scan = m.end()
                if closing or attrs.rstrip().endswith("/"):
                    continue
                cached = next_close.get(name, (-1, -1))
                if cached is not None and cached[0] < m.end():
                    close = re.compile(r"</" + name + r"\s*>", re.IGNORECASE).search(text, m.end())
                    cached = next_close[name] = (close.start(), close.end()) if close else None
                if cached is not None:
                    pos = for_scan = cached[1]
            elif name in w._KEEP_CONTENT_TAGS:
                out.append(text[pos:m.start()])
                out.append(" " if name == "br" else "\n\n" if name in w._BREAK_TAGS else "")
                pos = for_scan = m.end()
            else:
                for_scan = m.start() + 1
        return "".join(out) + text[pos:]

    alphabet = ["<", ">", "/", "ref", "REF", "br", "p", "span", " name=x", "/>", " inline", "math", "_", "é", "Ж", "</ref >",
                "</ref>", "<ref>", "\t", "\n", "=", "table", "gallery", "<gallery mode=inline>", "a", " ", "<b>", "<BR/>",
                "<p>", "</div>", "<unknown>", "<a b>", "2", "\u212a", "ſ", "<sc", "ript>", "</", "</REF", "</ref",
                "</reF\u2028>", "</\u0131\u0130", "</so", "</\u017fource>", "urce", "</maplin\u212a>", "\x1c", "\xa0",
                "source", "maplink", "<maplink>", "<source>", "</Source  \n>", "</ref\t>"]
    rng = random.Random(13)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        assert w._strip_tags(text, "T") == before(text), repr(text)


def test_trailing_heading_found_where_the_regex_finds_it():
    """`_first_heading` tries the trailing-section pattern only at lines starting `[ \\t]*==`."""
    import random

    from bertdata.text.wikitext import ENGLISH, _first_heading, markup_for

    patterns = [ENGLISH.trailing_section, markup_for("de").trailing_section, markup_for("ru").trailing_section]
    alphabet = ["=", "==", "===", " ", "\t", "\n", "See also", "see  also", "References", "Notes and references",
                "x", "Einzelnachweise", "Литература", "\n==", "== ", " ==", "&", ","]
    rng = random.Random(11)
    found = 0
    for _ in range(30_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        for pattern in patterns:
            m = pattern.search(text)
            assert _first_heading(pattern, text) == (m.start() if m else -1), repr(text)
            found += m is not None
    assert found > 100


def test_junk_lines_dropped_where_the_regex_dropped_them():
    """`_prose.drop_junk_lines` against the MULTILINE regex the cleaner used before it."""
    import random

    from bertdata.text._prose import drop_junk_lines

    junk = re.compile(r"^[ \t]*(?:=.*=[ \t]*|-{4,}.*|[|!*#:;].*)$", re.MULTILINE)
    alphabet = [" ", "\t", "=", "==", "-", "---", "----", "|", "!", "*", "#", ":", ";", "\n", "\n\n", "a", "word",
                "\r", "é", "Ж", "\u2028", "\x85", "{|", "|}", "= x =", "\u3000"]
    rng = random.Random(21)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert drop_junk_lines(text) == junk.sub("", text), repr(text)
    plain = "no junk here\nnor here"
    assert drop_junk_lines(plain) is plain


def _indented_reference(text: str) -> str:
    """What `drop_junk_lines(text, indented=True)` does, line by line in Python."""
    junk = re.compile(r"[ \t]*(?:=.*=[ \t]*|-{4,}.*|[|!*#:;].*)")
    lines = []
    for line in text.split("\n"):
        if not junk.fullmatch(line):
            lines.append(line)
            continue
        body = line.lstrip(" \t")
        marks = re.match(r"[:;*#]*", body).group()
        kept = ""
        if body[0] in ":;" and "*" not in marks and "#" not in marks:
            rest = body[len(marks):]
            if ";" in marks:
                colon = rest.find(":")
                rest = rest[colon + 1:] if colon >= 0 else ""
            rest = rest.lstrip(" \t")
            kept = f"\n\x01{rest}\n" if rest else ""
        lines.append(kept)
    return "\n".join(lines)


def test_indented_lines_are_split_off_where_the_python_reference_splits_them() -> None:
    """`_prose.drop_junk_lines(text, indented=True)` against the line-by-line Python it stands for."""
    import random

    from bertdata.text._prose import drop_junk_lines

    alphabet = [" ", "\t", ":", ";", "::", "; t :", "*", "#", "=", "= x =", "----", "|", "!", "\n", "\n\n", "a",
                "word.", "\u00e9", "\u0416", "\U0001d49c", "\u2028", "\r", "{|"]
    rng = random.Random(47)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert drop_junk_lines(text, indented=True) == _indented_reference(text), repr(text)
    # every line kept grows the text: the buffer grows with it
    many = ":a\n" * 10_000 + "; b : c\n" * 10_000
    assert drop_junk_lines(many, indented=True) == _indented_reference(many)
    plain = "no junk here\nnor here"
    assert drop_junk_lines(plain, indented=True) is plain


def test_table_lines_found_where_the_regex_found_them():
    """`_markup.table_lines` against the MULTILINE regex `_remove_tables` used before it."""
    import random

    from bertdata.text import wikitext as w

    table_line = re.compile(r"^[ \t:]*(\{\||\|\})", re.MULTILINE)
    alphabet = [" ", "\t", ":", "{", "|", "}", "{|", "|}", "\n", "a", "{{", "}}", "é", "Ж", "\r"]
    rng = random.Random(5)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        expected = [(m.start(), m.group(1), m.end()) for m in table_line.finditer(text)]
        assert w.table_lines(text) == expected, repr(text)


def test_comments_removed_as_the_python_loop_did():
    """`_markup.remove_comments` against the find loop the cleaner used before it."""
    import random

    from bertdata.text._tags import remove_comments

    def before(text: str) -> str:
        out, pos = [], 0
        while True:
            start = text.find("<!--", pos)
            if start < 0:
                return "".join(out) + text[pos:]
            out.append(text[pos:start])
            end = text.find("-->", start + 4)
            if end < 0:  # an unclosed comment hides the rest of the page
                return "".join(out)
            pos = end + 3

    alphabet = ["<", "!", "-", ">", "<!--", "-->", "--", "<!-", "->", "a", "é", "Ж", "😀", "\n", " "]
    rng = random.Random(17)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        assert remove_comments(text) == before(text), repr(text)
    plain = "no comment here"
    assert remove_comments(plain) is plain


def test_disambiguation_templates_found_where_the_regex_found_them():
    """`_markup.has_template` against the IGNORECASE search the cleaner used before it, with the
    characters Unicode folds onto the names' letters (K, long s, dotted and dotless i)."""
    import random

    from bertdata.text._markup import has_template
    from bertdata.text.wikitext import DISAMBIGUATION_TEMPLATES

    pattern = re.compile(r"\{\{\s*(?:" + "|".join(map(re.escape, DISAMBIGUATION_TEMPLATES)) + r")\s*(?:\||\}\})",
                         re.IGNORECASE)
    alphabet = ["{", "{{", "}", "}}", "|", " ", "\t", "\n", "\u00a0", "\u2003", "\x1c", "dab", "DAB", "Dab", "sia",
                "SIA", "\u017fia", "\u0130", "\u0131", "\u212a", "surname", "given name", "given  name",
                "disambig", "uation", "disambiguation", "set index article", "geodis", "x", "é", "Ж", "😀"]
    rng = random.Random(23)
    found = 0
    for _ in range(60_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        expected = pattern.search(text) is not None
        found += expected
        assert has_template(text, DISAMBIGUATION_TEMPLATES) == expected, repr(text)
    assert found > 100
    names = ("kilo", "sia", "ship index")
    folding = re.compile(r"\{\{\s*(?:kilo|sia|ship index)\s*(?:\||\}\})", re.IGNORECASE)
    for name in names:
        for letter, folded in (("i", "\u0130"), ("i", "\u0131"), ("k", "\u212a"), ("s", "\u017f"), ("i", "I")):
            text = "{{" + name.replace(letter, folded) + "}}"
            assert has_template(text, names) and folding.search(text), text
    with pytest.raises(ValueError, match="lower case"):
        has_template("{{Dab}}", ("Dab",))


def test_paragraphs_joined_as_the_split_and_quote_regexes_did():
    """`_prose.join_paragraphs` against the blank-line split, join and apostrophe regex it replaced."""
    import random

    from bertdata.text._prose import join_paragraphs

    blank_lines = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
    quotes = re.compile(r"''+")
    alphabet = ["\n", "\n", " ", "\t", "'", "''", "'''", "a", "word", "é", "Ж", "😀", "\r", "\u2028", "\x85", "\n \n"]
    rng = random.Random(29)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        expected = quotes.sub("", "\n".join(p.replace("\n", " ") for p in blank_lines.split(text) if p))
        assert join_paragraphs(text) == expected, repr(text)


def test_worded_lines_are_the_lines_the_regex_kept():
    import random

    from bertdata.text._prose import worded_lines

    word = re.compile(r"\w")
    alphabet = ["\n", " ", ".", "-", "_", "a", "7", "é", "Ж", "中", "٣", "😀", "\u00b2", "\u2028", "'", "—"]
    rng = random.Random(31)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert worded_lines(text) == [p for p in text.split("\n") if word.search(p)], repr(text)


def test_contains_is_in():
    import random

    from bertdata.text._markup import contains

    alphabet = ["[", "]", "{", "|", "[[", "]]", "{|", "a", "é", "Ж", "😀", "\n"]
    rng = random.Random(37)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        for needle in ("[[", "]]", "{|", "[", "{{|"):
            assert contains(text, needle) == (needle in text), (text, needle)
    with pytest.raises(ValueError, match="ASCII"):
        contains("x", "")


def test_splice_is_the_python_loop_it_replaced():
    """`_spans.splice` against the sort and loop the cleaner used before it, on random spans:
    nested, overlapping, empty, equal ones in either order, shown as None, "" or wider text."""
    import random

    from bertdata.text._spans import splice

    def before(text: str, spans: list) -> str:
        spans = sorted(spans, key=lambda s: (s[0], -s[1]))
        out, pos = [], 0
        cur_start, cur_end, cur_text = -1, -1, None
        for start, end, repl in spans:
            if start < cur_end:
                if end > cur_end:  # overlapping, not nested: neither replacement is trustworthy
                    cur_end, cur_text = end, None
                continue
            if cur_end >= 0:
                out += [text[pos:cur_start], cur_text or ""]
                pos = cur_end
            cur_start, cur_end, cur_text = start, end, repl
        if cur_end >= 0:
            out += [text[pos:cur_start], cur_text or ""]
            pos = cur_end
        return "".join(out + [text[pos:]])

    rng = random.Random(41)
    for _ in range(30_000):
        text = "".join(rng.choice("ab é{|}Ж😀\n") for _ in range(rng.randint(0, 16)))
        spans = []
        for _ in range(rng.randint(0, 6)):
            start = rng.randint(0, len(text))
            spans.append((start, rng.randint(start, len(text)), rng.choice([None, "", "x", "é", "中中", "😀"])))
        if spans and rng.random() < 0.3:
            spans.append(rng.choice(spans)[:2] + (rng.choice([None, "y"]),))
        assert splice(text, list(spans)) == before(text, spans), (text, spans)
    with pytest.raises(ValueError, match="within the text"):
        splice("abc", [(2, 4, None)])


def test_tidied_sentences_are_the_python_steps_they_replaced():
    """`_scan.tidy_sentences` against the per-sentence Python that `split_article` ran before it."""
    import random
    import re

    from bertdata.text._scan import tidy_sentences

    has_word = re.compile(r"\w")

    def before(pieces: list[str]) -> list[str]:
        sentences: list[str] = []
        for sentence in pieces:
            sentence = " ".join(sentence.split())
            if has_word.search(sentence):
                sentences.append(sentence)
            elif sentence and sentences:
                sentences[-1] += sentence
        return sentences

    alphabet = [" ", "  ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85", "\u200b", ".", '"', ")", "_", "a",
                "é", "Ж", "中", "٣", "²", "😀", "\u0301", "-", "!"]
    rng = random.Random(5)
    for _ in range(20_000):
        pieces = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 5))]
        assert tidy_sentences(pieces) == before(pieces), repr(pieces)
