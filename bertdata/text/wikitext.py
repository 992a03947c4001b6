"""MediaWiki wikitext -> plain prose paragraphs, one paragraph per line.

Every nested construct (templates, tables, links, tags) is removed with a linear
scan and an explicit stack, never with a backtracking regex over nested markup, so a
malformed or hostile page costs time proportional to its size. A page is either
cleaned as well as its markup allows or refused with a `SkippedPage` subclass whose
`reason` the pipeline counts.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bertdata.text import languages
from bertdata.text._markup import contains, has_template, heading_lines, resolve_simple_links, table_lines
from bertdata.text._prose import drop_junk_lines, join_paragraphs, tidy_prose, worded_lines
from bertdata.text._tags import remove_comments, strip_tags
from bertdata.text.skipped import (DEFAULT_MAX_CHARS, MAX_LINK_DEPTH, MAX_STRAY_LINK_BRACKETS, MAX_TABLE_MARKS, MAX_TAGS,
                                   DisambiguationPage, ListPage, MalformedPage, PageTooLarge, refuse_if_over)
from bertdata.text._spans import splice
from bertdata.text.templates import remove_templates

# Recorded in manifests: bump it whenever a change here, in templates or in skipped can change
# what `clean` returns.
RULES_VERSION = 4

# Pages that say they are lists or disambiguations: skipped where their list items outweigh their
# prose (`_mostly_listed`), as BERT's recipe ignores lists; some are character lists in prose.
_LIST_TITLE = re.compile(r"lists? of ", re.IGNORECASE)
# Templates that mark a disambiguation or set-index page wherever they are called: `{{name}}` or
# `{{name|...}}`, in any case, with any spaces inside the braces (`_markup.has_template`).
DISAMBIGUATION_TEMPLATES = (
    "disambiguation", "disambig", "disamb", "dab", "dbig", "hndis", "geodis", "numberdis", "letter disambiguation",
    "hospital disambiguation", "school disambiguation", "place name disambiguation",
    "species latin name disambiguation", "call sign disambiguation", "genus disambiguation",
    "mathematical disambiguation", "surname", "given name", "set index article", "sia", "shipindex", "ship index",
    "mountainindex", "roadindex", "sportindex", "chemistry index",
)
# The first paragraph of a disambiguation that uses none of the templates.
_REFERS_TO = re.compile(r"(?:may|might|can|could) (?:also )?(?:refer to|stand for|mean):$")

# Trailing apparatus: everything from the first such heading onwards is not prose.
_TRAILING_NAMES = (
    r"see also|references|notes|further reading|external links|bibliography|sources"
    r"|citations|footnotes|works cited|reference notes|notes and references"
)
_TRAILING_SECTION = re.compile(
    r"^[ \t]*(={2,6})[ \t]*(?:" + _TRAILING_NAMES + r")"
    r"(?:[ \t]*(?:,|&|and)[ \t]*(?:" + _TRAILING_NAMES + r"))*[ \t]*\1[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)

# Tags whose content is not prose: dropped with everything inside them.
_DROP_CONTENT_TAGS = frozenset(
    "ref references math chem ce gallery timeline imagemap score syntaxhighlight source pre"
    " graph mapframe maplink hiero templatedata templatestyles inputbox categorytree"
    " noinclude includeonly table caption indicator charinsert section"
    " style script".split()
)
# Dropped elements that MediaWiki renders as blocks: they end the paragraph around them.
_BLOCK_TAGS = frozenset(
    "references gallery timeline imagemap score syntaxhighlight source pre graph mapframe"
    " inputbox categorytree templatedata table".split()
)
# Formatting tags: the tag goes, its text stays.
_KEEP_CONTENT_TAGS = frozenset(
    "b i u s em strong small big sup sub span div blockquote center nowiki code tt kbd var"
    " samp font abbr cite q del ins strike mark bdi bdo dfn p poem onlyinclude ul ol li dl"
    " dd dt ruby rt rp wbr time data h1 h2 h3 h4 h5 h6 hr br".split()
)
_BREAK_TAGS = frozenset(("br", "hr", "p", "li", "dd", "dt", "div", "poem", "blockquote"))

_LINK_TOKEN = re.compile(r"\[\[|\]\]")
_EXTERNAL_LINK = re.compile(
    r"\[(?:https?:|ftp:|mailto:|news:|irc:|//)[^\s\[\]<>\"]{0,2000}(?:[ \t]([^\[\]\n]{0,500}))?\]"
)

_DROP_LINK_NS = re.compile(r"(?:file|image|media|category)\s*:", re.IGNORECASE)
_REDIRECT = re.compile(r"\s*#redirect", re.IGNORECASE)
# Interlanguage links are `[[xx:Title]]` with a language code; a leading colon would
# make them a visible link instead.
_INTERLANGUAGE = re.compile(r"[a-z]{2,3}(?:-[a-z]{2,8})*\s*:")
_PIPE_TRICK_SUFFIX = re.compile(r"\s*\([^()]*\)$")
_INTERWIKI_KEEP = frozenset(("wikt", "w", "s", "q", "n", "b", "v", "c", "d", "m", "mw"))

# Headings, horizontal rules, and table rows outside any table (stray `|` or `!` lines).
_JUNK_LINE = re.compile(r"^[ \t]*(?:=.*=[ \t]*|-{4,}.*|[|!].*)$", re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*[*#:;]+[ \t]*(.*)$", re.MULTILINE)
# For `_mostly_listed`: list items, and lines that end in a colon (the lead-ins of lists); and
# lines that are neither list nor prose: headings, rules, table rows, templates alone on a line.
_LISTED = re.compile(r"^[ \t]*[:;]*[*#].*$|^[ \t]*[^\s=|!].*:[ \t]*$", re.MULTILINE)
_UNCOUNTED = re.compile(r"^[ \t]*(?:=.*=|-{4,}.*|[|!].*|\{\{.*\}\})[ \t]*$", re.MULTILINE)
_SENTENCE_STOPS = (". ", "! ", "? ", '." ', "?\" ", '!" ')
_ENDS, _CLOSERS = (".", "!", "?"), "\"'\u201d\u2019)]"
# What `drop_junk_lines` puts before the text of an indented line or a definition: its paragraph
# is kept as whole sentences only. XML cannot hold the character, so no dump's text has it.
_INDENTED = "\x01"
_BEHAVIOUR_SWITCH = re.compile(r"__[A-Z]+__")
_ENTITY = re.compile(r"&(?:[a-zA-Z][a-zA-Z0-9]*|#[0-9]+|#[xX][0-9a-fA-F]+);")
_HAS_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Markup:
    """The parts of wikitext that a wiki spells in its own language (see `markup_for`)."""

    language: str
    drop_link: re.Pattern  # link targets starting so are files or categories: the link goes
    trailing_section: re.Pattern  # the heading where the reference apparatus starts
    redirect: re.Pattern  # page text starting so is a redirect


ENGLISH = Markup("en", _DROP_LINK_NS, _TRAILING_SECTION, _REDIRECT)


def _alternatives(words: Iterable[str]) -> str:
    # Sorted, so that equal tables give equal patterns; MediaWiki reads "_" in a link
    # target as a space.
    ordered = sorted({w.lower() for w in words}, key=lambda w: (-len(w), w))
    return "|".join(re.escape(w).replace(r"\ ", "[ _]+") for w in ordered)


def markup_for(code: str, namespaces: Mapping[int, str] | None = None) -> Markup:
    """The markup of the `code` Wikipedia: its File, Category and Media namespaces by their
    siteinfo names (`namespaces`, number -> name), their aliases and the English names
    every wiki accepts; its #REDIRECT words; its reference-section headings."""
    row = languages.language(code)
    namespaces = namespaces or {}
    named = [namespaces[n] for n in (languages.FILE_NS, languages.CATEGORY_NS, languages.MEDIA_NS)
             if namespaces.get(n)]
    drop = ("file", "image", "media", "category", *row.file, *row.category, *row.media, *named)
    # A wiki without a row of its own gets the English headings: small wikis often copy them.
    trailing = row.trailing or languages.LANGUAGES["en"].trailing
    joiners = row.joiners or languages.LANGUAGES["en"].joiners
    names = _alternatives(trailing)
    return Markup(
        language=row.code,
        drop_link=re.compile(r"(?:" + _alternatives(drop) + r")\s*:", re.IGNORECASE),
        trailing_section=re.compile(
            r"^[ \t]*(={2,6})[ \t]*(?:" + names + r")"
            r"(?:[ \t]*(?:,|&|" + _alternatives(joiners) + r")[ \t]*(?:" + names + r"))*[ \t]*\1[ \t]*$",
            re.IGNORECASE | re.MULTILINE),
        redirect=re.compile(r"\s*#(?:" + _alternatives(("redirect", *row.redirect)) + ")", re.IGNORECASE),
    )


def clean(
    wikitext: str, title: str = "", max_chars: int | None = DEFAULT_MAX_CHARS, keep_lists: bool = False,
    markup: Markup = ENGLISH,
) -> str:
    """Plain prose of one page: paragraphs joined by newlines, markup and apparatus gone.

    List items (`*`, `#` lines) go with tables and headings, as in BERT's recipe; indented
    lines (`:`) and definitions (`; term : definition`) stay as paragraphs of their own where
    they are whole sentences, the rest of them goes. With `keep_lists` every item (`*`, `#`,
    `;`, `:`) is kept whole as a paragraph of its own.

    Raises PageTooLarge when `wikitext` is longer than `max_chars` (None: no limit),
    MalformedPage when its links nest deeper, or its templates or stray link brackets are
    more numerous, than on any real page, DisambiguationPage for a disambiguation or
    set-index page and ListPage for a "List of ..." page (unless `keep_lists`) whose list
    items outweigh its prose (`_mostly_listed`); such a page with more prose is cleaned.
    `markup` is the wiki's language (`markup_for`); English by default.
    """
    if max_chars is not None and len(wikitext) > max_chars:
        raise PageTooLarge(
            f"page {title!r}: {len(wikitext):,} characters of wikitext, over the {max_chars:,} limit"
        )
    # A page that says it is a list or a disambiguation is skipped if its list items outweigh its
    # prose (`_mostly_listed`); the first paragraph may still say so ("... may refer to:").
    skip: type[ListPage | DisambiguationPage] | None = (
        ListPage if not keep_lists and _LIST_TITLE.match(title) else None)
    text = remove_comments(wikitext)
    if title.endswith("(disambiguation)") or has_template(text, DISAMBIGUATION_TEMPLATES):
        skip = DisambiguationPage
    cut = _first_heading(markup.trailing_section, text)
    if cut >= 0:
        text = text[:cut]
    if skip is not None and _mostly_listed(text):
        raise skip(f"page {title!r} is {skip.what}: its list items outweigh its prose")
    body = text
    text = _strip_tags(text, title)
    text = remove_templates(text, title)
    text = _remove_tables(text, title)
    text = _resolve_links(text, title, markup.drop_link)
    # Most pages hold neither by now; a one-character `in` costs a tenth of the regex's pass.
    if "[" in text:
        text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
    if "_" in text:
        text = _BEHAVIOUR_SWITCH.sub("", text)
    paragraphs = _paragraphs(text, keep_lists)
    if skip is None and paragraphs and _REFERS_TO.search(paragraphs[0]) and _mostly_listed(body):
        raise DisambiguationPage(f"page {title!r} is {DisambiguationPage.what}: its list items outweigh its prose")
    if not keep_lists:
        paragraphs = _without_lead_ins(paragraphs)
    return "\n".join(paragraphs)


def _mostly_listed(body: str) -> bool:
    """Whether more of a page's wikitext (less its comments and trailing apparatus) is in list
    items, and the lead-ins that end in a colon before them, than in the rest, its headings,
    rules, table rows and lines of a template alone left out: the wikitext as it is, before any
    cleaning, as a page skipped should cost little. `*`, `#` and `:*` items are list items; `:`
    and `;` lines count as prose."""
    rest = _LISTED.sub("", body)
    listed = len(body) - len(rest)
    prose = _UNCOUNTED.sub("", rest)
    return listed > len(prose) - prose.count("\n")


def _first_heading(heading: re.Pattern, text: str) -> int:
    """Where `heading.search(text)` would match (-1: nowhere), for a pattern that starts
    `^[ \t]*==` (MULTILINE): tried only at the lines that start so (found in C, `heading_lines`),
    where the regex engine would try every position of the page."""
    return next((line for line in heading_lines(text) if heading.match(text, line)), -1)


def _strip_tags(text: str, title: str) -> str:
    """Drop non-prose elements with their content; unwrap formatting tags (in C: `_tags`)."""
    if "<" not in text:
        return text
    refuse_if_over(text, ("<",), MAX_TAGS, "tags", title)
    return strip_tags(text, _DROP_CONTENT_TAGS, _BLOCK_TAGS, _KEEP_CONTENT_TAGS, _BREAK_TAGS)


def _remove_tables(text: str, title: str) -> str:
    """Remove `{| ... |}` tables (nested ones too); an unclosed table ends at a blank line."""
    if not contains(text, "{|"):  # templates are gone: '{' is rare now
        return text
    refuse_if_over(text, ("{|", "|}"), MAX_TABLE_MARKS, "table marks", title)
    spans: list[tuple[int, int, str | None]] = []
    depth = 0
    start = 0
    for line, mark, end in table_lines(text):
        if mark == "{|":
            if depth == 0:
                start = line
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                eol = text.find("\n", end)
                spans.append((start, len(text) if eol < 0 else eol, None))
    if depth:
        blank = text.find("\n\n", start)
        spans.append((start, len(text) if blank < 0 else blank, None))
    return splice(text, spans)


def _resolve_links(text: str, title: str, drop_link: re.Pattern) -> str:
    """Replace `[[target|label]]` by its label; drop File/Image/Category/interlanguage links.

    Links are resolved innermost first, so the links inside a File caption are already
    text when the whole File link is dropped.
    """
    # Fast path: two passes over bracket-free links resolve plain links and then the
    # File links whose captions held them; only odd leftovers need the stack below.
    # Once links resolve, '[' is rare: `contains` finds that quicker than `in`.
    for _ in range(2):
        if not contains(text, "[["):
            break
        text = resolve_simple_links(text, lambda inner: _link_text(inner, drop_link))
    if not contains(text, "[[") and not contains(text, "]]"):
        return text
    refuse_if_over(text, ("[[", "]]"), MAX_STRAY_LINK_BRACKETS, "unbalanced or nested link brackets", title)
    tokens = list(_LINK_TOKEN.finditer(text))
    opens: list[int] = []
    pair = {}  # index of an opening token -> index of its closing token
    for i, m in enumerate(tokens):
        if m.group() == "[[":
            opens.append(i)
        elif opens:
            pair[opens.pop()] = i
    closers = set(pair.values())
    buffers: list[list[str]] = [[]]
    pos = 0
    for i, m in enumerate(tokens):
        buffers[-1].append(text[pos : m.start()])
        pos = m.end()
        if i in pair:
            buffers.append([])
            if len(buffers) > MAX_LINK_DEPTH:
                raise MalformedPage(f"page {title!r}: links nested more than {MAX_LINK_DEPTH} deep")
        elif i in closers:
            inner = "".join(buffers.pop())
            buffers[-1].append(_link_text(inner, drop_link))
        elif m.group() == "[[":
            # Unclosed: the target and any caption up to the next link or line end go too.
            nxt = tokens[i + 1].start() if i + 1 < len(tokens) else len(text)
            eol = text.find("\n", m.end(), nxt)
            pos = nxt if eol < 0 else eol
        # An unmatched `]]` is simply dropped.
    buffers[-1].append(text[pos:])
    return "".join(buffers[0])


def _link_text(inner: str, drop_link: re.Pattern) -> str:
    target, bar, label = inner.partition("|")
    target = target.strip()
    if ":" in target:
        if drop_link.match(target):
            return ""
        if _INTERLANGUAGE.match(target) and target.split(":", 1)[0].strip() not in _INTERWIKI_KEEP:
            return ""
    if bar:
        label = label.strip()
        if label:
            return label
        # Pipe trick: `[[Paris, Texas|]]` shows "Paris", `[[Pan (god)|]]` shows "Pan".
        shown = target.lstrip(":").split(":", 1)[-1]
        return _PIPE_TRICK_SUFFIX.sub("", shown.split(",", 1)[0])
    return target.lstrip(":").lstrip("#")


def _paragraphs(text: str, keep_lists: bool) -> list[str]:
    """Lines -> paragraphs: list items go (or stand alone), wrapped prose lines are joined.

    Whole-text passes (regexes, C) rather than a loop over lines: a page of millions of
    short lines must not cost a Python iteration each.
    """
    if keep_lists:
        text = _LIST_ITEM.sub("\n\\1\n", _JUNK_LINE.sub("", text))
    else:
        text = drop_junk_lines(text, indented=True)
    # Runs of 2, 3 and 5 apostrophes are italic/bold markup, and longer ones are markup merged
    # across a removed template (`''{{flag|X}}''`): every run goes, with the line breaks.
    return worded_lines(_finish(join_paragraphs(text)))


def _without_lead_ins(paragraphs: list[str]) -> list[str]:
    """Each paragraph with the lead-in of a dropped list cut, and each indented one (`_INDENTED`)
    cut to its whole sentences; gone if no word is left. The others all have words (`_paragraphs`
    checked)."""
    kept = []
    for paragraph in paragraphs:
        if paragraph[0] == _INDENTED:
            paragraph = _whole_sentences(paragraph[1:].lstrip())
            if not _HAS_WORD.search(paragraph):
                continue
        elif paragraph.endswith(":"):
            paragraph = _drop_lead_in(paragraph)
            if not _HAS_WORD.search(paragraph):
                continue
        kept.append(paragraph)
    return kept


def _whole_sentences(paragraph: str) -> str:
    """An indented paragraph's whole sentences: all of it if it ends like a sentence (`.`, `!`
    or `?`, closing quotes or brackets after it), else up to its last sentence end, as a lead-in
    is cut; a line without one (a formula, a caption, a term) goes."""
    if paragraph.rstrip(_CLOSERS)[-1:] in _ENDS:
        return paragraph
    return _drop_lead_in(paragraph)


def _drop_lead_in(paragraph: str) -> str:
    """Cut the sentence that introduces a dropped list ("... played in film by:").

    Everything after the paragraph's last sentence end goes; a paragraph with none is
    only the lead-in and goes whole.
    """
    # The stop's space stays out; a closing quote in it stays in.
    cut = max((i + len(stop) - 1 for stop in _SENTENCE_STOPS if (i := paragraph.rfind(stop)) >= 0), default=0)
    return paragraph[:cut]


def _finish(text: str) -> str:
    """Inline clean-up of paragraphs joined by newlines; no pattern crosses a newline."""
    for _ in range(2):  # entities escaped twice in the source (`&amp;nbsp;`) show as text
        if "&" not in text or not _ENTITY.search(text):
            break
        text = html.unescape(text)
    # Odd and invisible spaces, separators and empty brackets left by removed templates and
    # references, spaces before punctuation: one C function for what took ten passes.
    return tidy_prose(text)
