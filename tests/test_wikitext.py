"""bertdata.text.wikitext: every markup rule, hostile input, and the real dump fragment."""

from __future__ import annotations

import bz2
import re
import time
import xml.etree.ElementTree as ET

import pytest

from bertdata.errors import BertdataError
from bertdata.text.wikitext import clean
from bertdata.text.skipped import DisambiguationPage, ListPage, MalformedPage, PageTooLarge, SkippedPage
from conftest import WIKI_FRAGMENT, need

# Markup that must never reach a training sentence.
LEFTOVER = re.compile(
    r"\{\{|\}\}|\[\[|\]\]|''|<ref|\{\||\|\}|\|-|thumb\||px\||Category:|&nbsp;"
    r"|<[a-zA-Z/]|&[a-z]+;|&#\d+;"
)


# -- one test per rule ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # templates, nested, parser functions, parameters
        ("A {{cite web|url=x|title={{lang|fr|y}}}} b.", "A b."),
        ("A {{#if:{{{1|}}}|yes|{{no|{{deeper}}}}}} b.", "A b."),
        ("A {{{1|default}}} b.", "A b."),
        ("{{Infobox person\n| name = X\n| born = {{birth date|1900|1|1}}\n}}\nX was a man.", "X was a man."),
        ("Stray }} braces.", "Stray braces."),
        # tables, nested
        ("Before.\n{| class=wikitable\n|-\n| a || b\n|}\nAfter.", "Before.\nAfter."),
        ("Before.\n{|\n| {|\n| inner\n|}\n| outer\n|}\nAfter.", "Before.\nAfter."),
        # references
        ('Fact.<ref name="a">Source {{cite book|t=x}}</ref> More.<ref name="a" /> End.', "Fact. More. End."),
        ("Fact<ref group=n>note</ref>.", "Fact."),
        # comments
        ("Visible <!-- hidden {{x}} --> text.", "Visible text."),
        ("Visible.<!-- never closed\nhidden", "Visible."),
        # non-prose tags with content
        ("Euler: <math>e^{i\\pi}+1=0</math> holds.", "Euler: holds."),
        ("A<gallery>\nFile:a.jpg|cap\n</gallery>\nB.", "A\nB."),
        ("Code.\n<syntaxhighlight lang=c>int x;</syntaxhighlight>\nDone.", "Code.\nDone."),
        ("X <source lang=py>y = 1</source> z.", "X\nz."),
        ("X <syntaxhighlight lang=py inline>y</syntaxhighlight> z.", "X z."),
        ("X\n<pre>raw {{x}}</pre>\nY.", "X\nY."),
        ("Chart.\n<timeline>j</timeline>\n<imagemap>j</imagemap>\n<score>c d</score>\nEnd.", "Chart.\nEnd."),
        ("Water is <chem>H2O</chem>.", "Water is."),
        # formatting tags: keep text, drop tag
        ("<b>Bold</b> <i>it</i> <small>s</small> x<sup>2</sup> H<sub>2</sub>O", "Bold it s x2 H2O"),
        ('<span style="color:red">red</span> <div class="c">box</div>', "red\nbox"),
        ("<blockquote>Quoted words.</blockquote>", "Quoted words."),
        ("<center>Mid</center> <nowiki>[[not a link]]</nowiki> <code>printf</code>", "Mid not a link printf"),
        ("Line one<br>line two<br />three.", "Line one line two three."),
        ("Prose a<b and c>d keeps its brackets.", "Prose a<b and c>d keeps its brackets."),
        # links
        ("[[Paris]] and [[Paris, Texas|the other one]].", "Paris and the other one."),
        ("[[apple]]s and [[cherry|cherrie]]s.", "apples and cherries."),
        ("[[Pan (god)|]] and [[Paris, Texas|]].", "Pan and Paris."),
        ("[[:Category:Cats|cat pages]] exist.", "cat pages exist."),
        ("[[wikt:anarchy|anarchy]] is a word.", "anarchy is a word."),
        ("[[#History|history]] section.", "history section."),
        # file links with nested links in the caption
        ("[[File:A.jpg|thumb|220px|A [[cat]] on a [[mat|rug]].]]\nText.", "Text."),
        ("[[Image:B.png|left|upright=1.2|[[x|y]] and [[z]]]] Text.", "Text."),
        ("[[Media:c.ogg|sound]] Text.", "Text."),
        # categories and interlanguage links
        ("Text.\n[[Category:Foo]]\n[[category:Bar|sort]]\n[[fr:Texte]]\n[[zh-min-nan:Bûn]]", "Text."),
        # external links
        ("See [http://example.com the site] now.", "See the site now."),
        ("Bare [http://example.com] link.", "Bare link."),
        ("Proto [//example.com/x relative] link.", "Proto relative link."),
        # behaviour switches
        ("__NOTOC__\nText __TOC__ here.__NOEDITSECTION__", "Text here."),
        # bold and italics
        ("'''Bold''' ''italic'' '''''both''''' rock 'n' roll", "Bold italic both rock 'n' roll"),
        ("''{{flag|Azores}}'' (PRT)", "Azores (PRT)"),
        # entities, also escaped twice in the source
        ("A&nbsp;B &amp; C &#8211; D &eacute; &amp;nbsp;E &lt;x&gt;", "A B & C \u2013 D \u00e9 E <x>"),
        # lists go by default, and indented lines that are not whole sentences (test_wikitext_lists.py)
        ("Intro.\n* one\n** two\n# three\n#: four\n; term\n: definition\nAfter.", "Intro.\nAfter."),
        # headings and horizontal rules
        ("Intro.\n== History ==\nOld.\n=== Early ===\nOlder.\n----\nLast.", "Intro.\nOld.\nOlder.\nLast."),
        # wrapped lines of one paragraph are joined
        ("One sentence\ncontinues here.\n\nNew paragraph.", "One sentence continues here.\nNew paragraph."),
        # whitespace and empty brackets left by removed templates
        ("Albedo ({{IPAc-en|al|b|i}}; {{lang|la|x}}) is  a   term .", "Albedo (x) is a term."),
        ("Born ({{IPA|x}}; 1 May 1900) in it.", "Born (1 May 1900) in it."),
        ("Word ( ; ) and [ ] gone , really ,, yes .", "Word and gone, really, yes."),
        ("Wait ... what?", "Wait ... what?"),
        # a few inline templates keep their text
        (
            "{{convert|5|km|mi}} and {{convert|6|ft|4|in|cm}} and {{convert|1|to|2|m}}.",
            "5 km and 6 ft 4 in and 1 to 2 m.",
        ),
        (
            "{{nowrap|no wrap}} {{lang|de|Wort}} {{transl|ar|kitab}} 1{{ndash}}2 {{frac|1|2}}",
            "no wrap Wort kitab 1\u20132 1/2",
        ),
        ("{{as of|2010}}, it grew.", "As of 2010, it grew."),
    ],
)
def test_rule(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    "heading",
    ["See also", "References", "Notes", "Further reading", "External links", "Bibliography",
     "Sources", "Citations", "Footnotes", "NOTES AND REFERENCES", "external links"],
)
def test_trailing_apparatus_is_cut(heading: str) -> None:
    text = f"Prose.\n\n== Life ==\nMore prose.\n\n=={heading}==\n* Some list\n\n== Later ==\nGone too."
    assert clean(text) == "Prose.\nMore prose."


def test_heading_that_merely_mentions_references_is_kept() -> None:
    assert clean("A.\n== References in popular culture ==\nB.") == "A.\nB."


def test_empty_and_markup_only_pages() -> None:
    assert clean("") == ""
    assert clean("{{Use dmy dates}}\n[[Category:X]]") == ""


# -- robustness ----------------------------------------------------------------------


def test_unclosed_template_swallows_only_its_paragraph() -> None:
    text = "Intro.\n\n{{Infobox\n| a = [[b]]\n| c = d\n\nProse after {{cite|x}} it."
    assert clean(text) == "Intro.\nProse after it."


def test_unclosed_table_ends_at_blank_line() -> None:
    assert clean("Intro.\n{| class=x\n|-\n| cell\n\nProse after.") == "Intro.\nProse after."


def test_unclosed_link_and_tag() -> None:
    assert clean("Good [[link and more\nNext line.") == "Good Next line."
    assert clean("Fact.<ref>never closed\nMore.") == "Fact.never closed More."


@pytest.mark.parametrize("depth", [10_000])
def test_absurd_template_nesting(depth: int) -> None:
    start = time.perf_counter()
    assert clean("A " + "{{x|" * depth + "y" + "}}" * depth + " B.") == "A B."
    assert clean("A " + "{{x|" * depth + " B.") == "A"
    assert time.perf_counter() - start < 5


def test_absurd_link_nesting_is_refused_or_cleaned() -> None:
    depth = 10_000
    with pytest.raises(MalformedPage):
        clean("[[a|" * depth + "x" + "]]" * depth)
    assert clean("[[" * depth + "x") == ""
    assert clean("A." + "]]" * depth) == "A."


@pytest.mark.parametrize("limit, mark, per_mark, what", [
    ("MAX_TAGS", "<b>x</b> ", 2, "tags"),
    ("MAX_TEMPLATE_BRACES", "{{x}} ", 2, "template braces"),
    ("MAX_TABLE_MARKS", "\n{|\n|}\n", 2, "table marks"),
    ("MAX_STRAY_LINK_BRACKETS", "word ]] ", 1, "unbalanced or nested link brackets"),
])
def test_a_page_over_a_mark_limit_is_refused_and_one_at_it_is_not(monkeypatch, limit, mark, per_mark, what) -> None:
    from bertdata.text import templates, wikitext

    monkeypatch.setattr(templates if limit == "MAX_TEMPLATE_BRACES" else wikitext, limit, 40)
    prose = "Some words of prose here. " * 10
    assert clean(prose + mark * (40 // per_mark))
    with pytest.raises(MalformedPage, match=rf"{41 + (per_mark > 1):,} {what}, over the limit of 40"):
        clean(prose + mark * (40 // per_mark + 1))


def test_skip_reasons_are_bertdata_errors() -> None:
    assert issubclass(PageTooLarge, SkippedPage) and issubclass(MalformedPage, SkippedPage)
    assert issubclass(SkippedPage, BertdataError)
    assert PageTooLarge.reason != MalformedPage.reason


def test_size_guard() -> None:
    with pytest.raises(PageTooLarge, match="Big"):
        clean("x" * 101, title="Big", max_chars=100)
    assert clean("x" * 100, max_chars=100) == "x" * 100


TEN_MB = 10_000_000


def _repeat(unit: str) -> str:
    return unit * (TEN_MB // len(unit))
STRUCTURE = re.compile(r"\{\{|\}\}|\[\[|\]\]|''|<ref|\{\||\|\}|&nbsp;|&[a-z]+;")


@pytest.mark.slow
@pytest.mark.parametrize(
    "unit",
    [
        "{{", "}}", "{{{", "{{a|", "[[", "]]", "[[a|", "[[a]] ", "{|\n", "|}\n", "<ref>", "<ref name=x>",
        "</ref>", "<b", "<!--", "'''", "==", "= x =\n", "[http://a ", "(", "( ,", "&amp;", " ",
        "\u00a0", "x", "Prose sentence. ", "{{convert|1111111111111111111111111111111111", "{{lang|a |",
    ],
)
def test_ten_megabyte_pathological_page(unit: str) -> None:
    page = _repeat(unit)
    with pytest.raises(PageTooLarge):
        clean(page)
    start = time.perf_counter()
    try:
        out = clean(page, max_chars=None)
    except MalformedPage:
        out = ""
    assert time.perf_counter() - start < 20, unit
    # `<b` with no `>` is prose to MediaWiki too, so only real markup is checked here.
    assert not STRUCTURE.search(out), unit


# -- the real dump fragment ----------------------------------------------------------


def _articles() -> list[tuple[str, str]]:
    articles = []
    with bz2.open(need(WIKI_FRAGMENT)) as f:
        for _, elem in ET.iterparse(f):
            if elem.tag.rsplit("}", 1)[-1] != "page":
                continue
            ns = elem.findtext("{*}ns")
            text = elem.findtext("{*}revision/{*}text") or ""
            if ns == "0" and elem.find("{*}redirect") is None:
                articles.append((elem.findtext("{*}title"), text))
            elem.clear()
    return articles


@pytest.fixture(scope="module")
def cleaned_fragment() -> list[tuple[str, str]]:
    """(title, text) of the fragment's articles that are not list or disambiguation pages."""
    out = []
    for title, text in _articles():
        try:
            out.append((title, clean(text, title)))
        except (ListPage, DisambiguationPage):
            pass
    return out


def test_fragment_has_no_markup_in_any_sentence(cleaned_fragment) -> None:
    from bertdata.text.sentences import split_article

    n_sentences = 0
    for title, text in cleaned_fragment:
        for sentence in split_article(text):
            n_sentences += 1
            found = LEFTOVER.search(sentence)
            assert not found, f"{title}: {found.group()!r} in {sentence!r}"
            assert "\n" not in sentence and sentence == sentence.strip()
    assert n_sentences > 15_000


def test_fragment_output_is_substantial(cleaned_fragment) -> None:
    # 106 articles less 2 "List of" pages and 8 disambiguations (see test_fragment_skips).
    assert len(cleaned_fragment) == 96
    nonempty = [text for _, text in cleaned_fragment if len(text) > 200]
    assert len(nonempty) >= 92
    total = sum(len(text) for _, text in cleaned_fragment)
    # 5.7 MB of wikitext; prose is roughly half of it once citations and tables go.
    assert 1_500_000 < total < 4_000_000
    anarchism = dict(cleaned_fragment)["Anarchism"]
    assert anarchism.startswith("Anarchism is a political philosophy that advocates self-governed")
    assert "Further reading" not in anarchism and "Retrieved" not in anarchism


def test_fragment_output_is_tidy(cleaned_fragment) -> None:
    for title, text in cleaned_fragment:
        for line in text.split("\n"):
            assert "  " not in line and line == line.strip(), title
            assert not re.search(r"\(\s*[,;]?\s*\)| [,;](?!\S)", line), (title, line)


def test_fragment_skips_list_and_disambiguation_pages() -> None:
    skipped = {}
    for title, text in _articles():
        try:
            clean(text, title)
        except SkippedPage as e:
            skipped[title] = e.reason
    assert skipped == {
        "List of Atlas Shrugged characters": "list_page", "List of anthropologists": "list_page",
        "Alien": "disambiguation", "Ada": "disambiguation", "Aa River": "disambiguation",
        "Austin (disambiguation)": "disambiguation", "Aberdeen (disambiguation)": "disambiguation",
        "Argument (disambiguation)": "disambiguation", "Animal (disambiguation)": "disambiguation",
        "Asia Minor (disambiguation)": "disambiguation",
    }


def test_fragment_sentences_end_like_sentences(cleaned_fragment) -> None:
    from bertdata.text.sentences import split_article

    # With list items kept, about 7% of sentences were list debris ("Stage Struck (1925)").
    sentences = [s for _, text in cleaned_fragment for s in split_article(text)]
    unterminated = [s for s in sentences if not re.search(r"[.!?][\"'\u201d\u2019)\]]*$|[\"'\u201d\u2019)\]]$", s)]
    assert len(unterminated) < 0.01 * len(sentences), unterminated[:20]


# -- other languages ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "namespaces", "wikitext", "expected"),
    [
        # siteinfo names, table aliases and the English names every wiki accepts all go
        ("de", {6: "Datei", 14: "Kategorie"}, "A [[Datei:X.jpg|mini|Bild]] b [[Bild:Y.png]] c [[Image:Z.png]] d.",
         "A b c d."),
        ("de", {}, "A[[Kategorie:Ort in Berlin| ]] [[kategorie:Foo]][[Medium:Ton.ogg]] b.", "A b."),
        ("ru", {6: "Файл"}, "Город [[Файл:A.jpg|мини|Кремль]] [[Изображение:B.png|слева]] стоит.", "Город стоит."),
        ("bg", {}, "Град [[Картинка:Карта.png|ляво]][[категория:Столици]] е.", "Град е."),
        # a language without a row: only what its siteinfo names, with spaces as "_"
        ("uk", {6: "Файл", 14: "Категорія"}, "Місто [[Файл:Kyiv.jpg|міні]] [[Категорія:Столиці]] є.", "Місто є."),
        ("xx", {6: "Pila Faili"}, "A [[Pila_Faili:X.jpg|b]] [[Pila Faili : Y.jpg]] c.", "A c."),
        # other namespaces stay links with text
        ("de", {}, "Die [[Wikipedia:Relevanz|Relevanz]] und [[Berlin]].", "Die Relevanz und Berlin."),
    ],
)
def test_localized_file_and_category_links(code, namespaces, wikitext, expected) -> None:
    from bertdata.text.wikitext import markup_for

    assert clean(wikitext, markup=markup_for(code, namespaces)) == expected


@pytest.mark.parametrize(
    ("code", "heading"),
    [
        ("de", "== Einzelnachweise =="), ("de", "==Siehe auch=="), ("de", "== Literatur und Weblinks =="),
        ("ru", "== См. также =="), ("ru", "== Примечания =="), ("bg", "== Външни препратки =="),
        ("fr", "== Notes et références =="), ("es", "== Véase también =="), ("pl", "== Przypisy =="),
        ("tr", "== Kaynakça =="), ("el", "== Παραπομπές =="), ("sv", "=== Källor ==="),
    ],
)
def test_localized_trailing_sections(code, heading) -> None:
    from bertdata.text.wikitext import markup_for

    text = f"Erster Satz hier.\n\n{heading}\nVerweis auf eine Quelle.\n"
    assert clean(text, markup=markup_for(code)) == "Erster Satz hier."
    # The English markup keeps them: the table is what recognises them.
    assert "Verweis" in clean(text)


def test_localized_heading_that_only_starts_like_a_trailing_one_stays() -> None:
    from bertdata.text.wikitext import markup_for

    text = "Erster Satz.\n\n== Literaturgeschichte ==\nZweiter Satz.\n"
    assert clean(text, markup=markup_for("de")) == "Erster Satz.\nZweiter Satz."


def test_english_markup_from_siteinfo_is_the_default() -> None:
    from bertdata.text.wikitext import ENGLISH, markup_for

    built = markup_for("en", {-2: "Media", 6: "File", 14: "Category"})
    samples = ["[[File:x.jpg|thumb|A [[b]]]] c.", "[[image : y.png]] d.", "[[Category:Z]] e.",
               "f\n\n== Notes and references ==\ng", "h\n\n== See also, external links ==\ni", "[[Media:A.ogg]] j."]
    for text in samples:
        assert clean(text, markup=built) == clean(text, markup=ENGLISH) == clean(text), text
    for text in ("#REDIRECT [[A]]", " #redirect[[A]]", "#WEITERLEITUNG [[A]]", "Text"):
        assert bool(built.redirect.match(text)) == bool(ENGLISH.redirect.match(text)), text


@pytest.mark.parametrize(
    ("code", "text"),
    [("de", "#WEITERLEITUNG [[Berlin]]"), ("de", "#weiterleitung[[Berlin]]"), ("ru", "#ПЕРЕНАПРАВЛЕНИЕ [[Москва]]"),
     ("ru", "#перенапр [[Москва]]"), ("bg", "#ПРЕНАСОЧВАНЕ [[София]]"), ("fr", "#REDIRECTION [[Paris]]"),
     ("tr", "#YÖNLENDİRME [[Ankara]]"), ("uk", "#REDIRECT [[Київ]]"), ("de", "#REDIRECT [[Berlin]]")],
)
def test_localized_redirects(code, text) -> None:
    from bertdata.text.wikitext import ENGLISH, markup_for

    assert markup_for(code).redirect.match(text)
    if "REDIRECT" not in text:
        assert not ENGLISH.redirect.match(text)


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


def test_a_link_text_longer_than_its_link_is_refused():
    from bertdata.text._markup import resolve_simple_links

    with pytest.raises(ValueError, match="no longer than the link"):
        resolve_simple_links("a [[x:y]] b", lambda inner: inner * 3)
    # The text is built in the page's own kind: a wider character could not be written there.
    with pytest.raises(ValueError, match="of no wider characters"):
        resolve_simple_links("a [[x:y]] b", lambda inner: "\u4e2d")


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


def test_a_failing_template_render_raises_through_the_scan():
    from bertdata.text._markup import template_spans

    def render(name, start, end, children):
        raise RuntimeError(f"render {name}")

    with pytest.raises(RuntimeError, match="render lang"):
        template_spans("a {{lang|fr|b}} c", frozenset({"lang"}), "lang-", 256, 8, render)


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
