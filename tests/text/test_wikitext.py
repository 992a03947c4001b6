"""bertdata.text.wikitext: every markup rule, hostile input, and the real dump fragment."""

from __future__ import annotations

import bz2
import re
import time
import xml.etree.ElementTree as ET

import pytest

from bertdata.errors import BertdataError
from bertdata.text.wikitext import clean
from bertdata.text.skipped import MalformedPage, PageTooLarge, SkippedPage
from conftest import WIKI_FRAGMENT, need
from text_references import (  # noqa: F401 (collected here; test_fuzz_text reruns them)
    test_tidied_prose_is_the_passes_it_replaced,
    test_simple_links_resolve_as_the_regex_and_callback_did,
    test_template_spans_are_the_python_matcher_they_replaced,
    test_stripped_tags_are_the_python_loop_they_replaced,
    test_trailing_heading_found_where_the_regex_finds_it,
    test_junk_lines_dropped_where_the_regex_dropped_them,
    test_indented_lines_are_split_off_where_the_python_reference_splits_them,
    test_table_lines_found_where_the_regex_found_them,
    test_comments_removed_as_the_python_loop_did,
    test_disambiguation_templates_found_where_the_regex_found_them,
    test_paragraphs_joined_as_the_split_and_quote_regexes_did,
    test_worded_lines_are_the_lines_the_regex_kept,
    test_contains_is_in,
    test_splice_is_the_python_loop_it_replaced,
)

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
def cleaning() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The fragment cleaned once for the module (a second or so): (title, text) of the articles
    that are not list or disambiguation pages, and the skipped ones' titles with their reasons."""
    out, skipped = [], {}
    for title, text in _articles():
        try:
            out.append((title, clean(text, title)))
        except SkippedPage as e:
            skipped[title] = e.reason
    return out, skipped


@pytest.fixture(scope="module")
def cleaned_fragment(cleaning) -> list[tuple[str, str]]:
    return cleaning[0]


@pytest.fixture(scope="module")
def fragment_sentences(cleaned_fragment) -> list[tuple[str, str]]:
    """(title, sentence) of every sentence of the cleaned fragment."""
    from bertdata.text.sentences import split_article

    return [(title, sentence) for title, text in cleaned_fragment for sentence in split_article(text)]


def test_fragment_has_no_markup_in_any_sentence(fragment_sentences) -> None:
    for title, sentence in fragment_sentences:
        found = LEFTOVER.search(sentence)
        assert not found, f"{title}: {found.group()!r} in {sentence!r}"
        assert "\n" not in sentence and sentence == sentence.strip()
    assert len(fragment_sentences) > 15_000


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


def test_fragment_skips_list_and_disambiguation_pages(cleaning) -> None:
    assert cleaning[1] == {
        "List of Atlas Shrugged characters": "list_page", "List of anthropologists": "list_page",
        "Alien": "disambiguation", "Ada": "disambiguation", "Aa River": "disambiguation",
        "Austin (disambiguation)": "disambiguation", "Aberdeen (disambiguation)": "disambiguation",
        "Argument (disambiguation)": "disambiguation", "Animal (disambiguation)": "disambiguation",
        "Asia Minor (disambiguation)": "disambiguation",
    }


def test_fragment_sentences_end_like_sentences(fragment_sentences) -> None:
    # With list items kept, about 7% of sentences were list debris ("Stage Struck (1925)").
    sentences = [s for _, s in fragment_sentences]
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


def test_a_link_text_longer_than_its_link_is_refused():
    from bertdata.text._markup import resolve_simple_links

    with pytest.raises(ValueError, match="no longer than the link"):
        resolve_simple_links("a [[x:y]] b", lambda inner: inner * 3)
    # The text is built in the page's own kind: a wider character could not be written there.
    with pytest.raises(ValueError, match="of no wider characters"):
        resolve_simple_links("a [[x:y]] b", lambda inner: "\u4e2d")


def test_a_failing_template_render_raises_through_the_scan():
    from bertdata.text._markup import template_spans

    def render(name, start, end, children):
        raise RuntimeError(f"render {name}")

    with pytest.raises(RuntimeError, match="render lang"):
        template_spans("a {{lang|fr|b}} c", frozenset({"lang"}), "lang-", 256, 8, render)


