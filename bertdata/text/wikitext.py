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
from bertdata.text._scan import squeeze_spaces
from bertdata.config import TextConfig
from bertdata.errors import BertdataError

# Recorded in manifests: bump it whenever a change here can change what `clean` returns.
RULES_VERSION = 3

# Pages longer than this are refused; `TextConfig.max_page_chars` says why 5 MB.
DEFAULT_MAX_CHARS = TextConfig.max_page_chars

# Links nest legitimately only inside File captions (depth 2, rarely 3); each level
# copies its label once, so a cap keeps hostile nesting from turning quadratic.
MAX_LINK_DEPTH = 32
# Brackets left once plain and File links are resolved are typos, a handful per page;
# beyond this many the page is generated junk and the per-bracket walk is not worth it.
MAX_STRAY_LINK_BRACKETS = 10_000
# The densest real pages (long lists of flag and convert templates) hold a few tens of
# thousands of templates, tags or table lines; each costs a few microseconds of Python,
# so a page with far more is generated junk refused before the walk, not after it.
MAX_TEMPLATE_BRACES = 500_000
# Templates that show text nest a few deep ({{small|{{native name|ar|{{noitalic|...}}}}}});
# each level copies its text once, so deeper ones are dropped, keeping the walk linear.
MAX_EXPAND_DEPTH = 8
# Longer than any template's name: a head without `|` in this many characters is not one.
MAX_TEMPLATE_NAME = 256
MAX_TAGS = 500_000
MAX_TABLE_MARKS = 100_000


class SkippedPage(BertdataError):
    """A page `clean` refuses; `reason` is the short key the pipeline counts it under."""

    reason = "skipped"


class PageTooLarge(SkippedPage):
    reason = "page_too_large"


class MalformedPage(SkippedPage):
    reason = "malformed_page"


class ListPage(SkippedPage):
    reason = "list_page"


class DisambiguationPage(SkippedPage):
    reason = "disambiguation"


# Pages that are lists or disambiguations hold no passages; BERT's recipe ignores lists.
_LIST_TITLE = re.compile(r"lists? of ", re.IGNORECASE)
_DISAMBIGUATION_TEMPLATE = re.compile(
    r"\{\{\s*(?:disambiguation|disambig|disamb|dab|dbig|hndis|geodis|numberdis|letter disambiguation"
    r"|hospital disambiguation|school disambiguation|place name disambiguation|species latin name disambiguation"
    r"|call sign disambiguation|genus disambiguation|mathematical disambiguation|surname|given name"
    r"|set index article|sia|shipindex|ship index|mountainindex|roadindex|sportindex|chemistry index)"
    r"\s*(?:\||\}\})",
    re.IGNORECASE,
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
_CLOSERS = {name: re.compile(r"</" + name + r"\s*>", re.IGNORECASE) for name in _DROP_CONTENT_TAGS}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)\b([^<>]*)>")
_BREAK_TAGS = frozenset(("br", "hr", "p", "li", "dd", "dt", "div", "poem", "blockquote"))

_BRACE_RUN = re.compile(r"\{\{+|\}\}+")
_TABLE_LINE = re.compile(r"^[ \t:]*(\{\||\|\})", re.MULTILINE)
_LINK_TOKEN = re.compile(r"\[\[|\]\]")
_SIMPLE_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
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
_LIST_LINE = re.compile(r"^[ \t]*[*#:;].*$", re.MULTILINE)
_SENTENCE_STOPS = (". ", "! ", "? ", '." ', "?\" ", '!" ')
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_BEHAVIOUR_SWITCH = re.compile(r"__[A-Z]+__")
_QUOTES = re.compile(r"''+")
_ENTITY = re.compile(r"&(?:[a-zA-Z][a-zA-Z0-9]*|#[0-9]+|#[xX][0-9a-fA-F]+);")
_HAS_WORD = re.compile(r"\w")

# Leftovers of removed templates and references: brackets left empty or with a
# separator stuck inside, a space before punctuation, a separator before ")".
_EMPTY_PARENS = re.compile(r"\((?: ?[,;:.\u2013\u2014-])* ?\)")
# Possessive runs, the closing one tried only from a run's first character, so that a
# long run of separators costs one scan, not one per character.
_PAREN_OPEN_SEPARATOR = re.compile(r"\([ ,;:]++")
_PAREN_CLOSE_SEPARATOR = re.compile(r"(?<![ ,;:])[ ,;:]++\)")
_PAREN_NEEDLES = ("( ", "(,", "(;", "(:")
_CLOSE_NEEDLES = (" )", ",)", ";)", ":)")
_SPACE_BEFORE_PUNCT = re.compile(r" (?=[,;:!?)\]]|\.(?!\.))")

_ARG_KEY = re.compile(r"[\w -]+=")  # on stripped arguments
_NUMBER = re.compile(r"[-+\u2212]?(?=\.?\d)[\d,]*(?:\.\d+)?(?:e-?\d+)?$")
_RANGE_WORDS = {"to": " to ", "and": " and ", "or": " or ", "-": "\u2013", "\u2013": "\u2013",
                "by": " by ", "x": " \u00d7 ", "+/-": " \u00b1 "}
_UNITS = {"sqmi": "sq mi", "sqkm": "km2", "e6acre": "million acres", "e6km2": "million km2",
          "acre": "acres", "Tcuft": "trillion cu ft", "e9m3": "billion m3", "e6mi": "million mi"}


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

    List items (`*`, `#`, `;`, `:` lines) go with tables and headings, as in BERT's
    recipe, unless `keep_lists`, which keeps each item as a paragraph of its own.

    Raises PageTooLarge when `wikitext` is longer than `max_chars` (None: no limit),
    MalformedPage when its links nest deeper, or its templates or stray link brackets are
    more numerous, than on any real page, DisambiguationPage for a disambiguation or
    set-index page, and ListPage for a "List of ..." page unless `keep_lists`.
    `markup` is the wiki's language (`markup_for`); English by default.
    """
    if max_chars is not None and len(wikitext) > max_chars:
        raise PageTooLarge(
            f"page {title!r}: {len(wikitext):,} characters of wikitext, over the {max_chars:,} limit"
        )
    if not keep_lists and _LIST_TITLE.match(title):
        raise ListPage(f"page {title!r} is a list")
    text = _remove_comments(wikitext)
    if title.endswith("(disambiguation)") or _DISAMBIGUATION_TEMPLATE.search(text):
        raise DisambiguationPage(f"page {title!r} is a disambiguation page")
    cut = _first_heading(markup.trailing_section, text)
    if cut >= 0:
        text = text[:cut]
    text = _strip_tags(text, title)
    text = _remove_templates(text, title)
    text = _remove_tables(text, title)
    text = _resolve_links(text, title, markup.drop_link)
    text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
    text = _BEHAVIOUR_SWITCH.sub("", text)
    paragraphs = _paragraphs(text, keep_lists)
    if paragraphs and _REFERS_TO.search(paragraphs[0]):
        raise DisambiguationPage(f"page {title!r} is a disambiguation page")
    if not keep_lists:
        paragraphs = [_drop_lead_in(p) if p.endswith(":") else p for p in paragraphs]
    return "\n".join(p for p in paragraphs if _HAS_WORD.search(p))


def _first_heading(heading: re.Pattern, text: str) -> int:
    """Where `heading.search(text)` would match (-1: nowhere), for a pattern that starts
    `^[ \t]*==` (MULTILINE): tried only at the lines that start so, which `str.find` finds
    many times faster than the regex engine tries every position of the page."""
    at = text.find("==")
    while at >= 0:
        line = text.rfind("\n", 0, at) + 1
        if not text[line:at].strip(" \t"):
            if heading.match(text, line):
                return line
        end = text.find("\n", at)
        if end < 0:
            return -1
        at = text.find("==", end)
    return -1


def _refuse_if_over(count: int, limit: int, what: str, title: str) -> None:
    if count > limit:
        raise MalformedPage(f"page {title!r}: {count:,} {what}, over the limit of {limit:,}")


def _remove_comments(text: str) -> str:
    if "<!--" not in text:
        return text
    out = []
    pos = 0
    while True:
        start = text.find("<!--", pos)
        if start < 0:
            out.append(text[pos:])
            break
        out.append(text[pos:start])
        end = text.find("-->", start + 4)
        if end < 0:  # MediaWiki hides an unclosed comment up to the end of the page
            break
        pos = end + 3
    return "".join(out)


def _strip_tags(text: str, title: str) -> str:
    """Drop non-prose elements with their content; unwrap formatting tags."""
    if "<" not in text:
        return text
    _refuse_if_over(text.count("<"), MAX_TAGS, "tags", title)
    out = []
    pos = 0
    # Where the next closing tag of each dropped element is (None: there is none left),
    # so that unclosed elements never rescan the rest of the page.
    next_close: dict[str, tuple[int, int] | None] = {}
    for_scan = 0
    while True:
        m = _TAG.search(text, for_scan)
        if not m:
            break
        closing, name, attrs = m.group(1), m.group(2).lower(), m.group(3)
        if attrs.strip(" \t\n/") and ("=" not in attrs or attrs[0] not in " \t\n/"):
            # Not a tag but prose: `a<b and c>d` has no attribute with a value.
            for_scan = m.start() + 1
            continue
        if name in _DROP_CONTENT_TAGS:
            out.append(text[pos : m.start()])
            if name in _BLOCK_TAGS and "inline" not in attrs:
                out.append("\n\n")
            pos = for_scan = m.end()
            if closing or attrs.rstrip().endswith("/"):
                continue
            cached = next_close.get(name, (-1, -1))
            if cached is not None and cached[0] < m.end():
                close = _CLOSERS[name].search(text, m.end())
                cached = next_close[name] = (close.start(), close.end()) if close else None
            if cached is not None:
                pos = for_scan = cached[1]
        elif name in _KEEP_CONTENT_TAGS:
            out.append(text[pos : m.start()])
            out.append(" " if name == "br" else "\n\n" if name in _BREAK_TAGS else "")
            pos = for_scan = m.end()
        else:  # not a tag we know: `a<b>c` in prose stays as written
            for_scan = m.start() + 1
    out.append(text[pos:])
    return "".join(out)


def _remove_templates(text: str, title: str) -> str:
    """Remove `{{...}}` and `{{{...}}}` with MediaWiki's brace-run matching.

    An unclosed `{{` swallows the rest of its paragraph (up to a blank line): the
    alternative, leaving the template's name and parameters as text, is worse.
    """
    if "{{" not in text and "}}" not in text:
        return text
    _refuse_if_over(text.count("{{") + text.count("}}"), MAX_TEMPLATE_BRACES, "template braces", title)
    # [start of the opening run, braces still open, the spans of its closed children]
    stack: list[list] = []
    spans: list[tuple[int, int, str | None]] = []
    for m in _BRACE_RUN.finditer(text):
        run = m.end() - m.start()
        if text[m.start()] == "{":
            stack.append([m.start(), run, []])
            continue
        pos = m.start()
        while run >= 2 and stack:
            top = stack[-1]
            take = 3 if top[1] >= 3 and run >= 3 else 2
            top[1] -= take
            run -= take
            pos += take
            if top[1] < 2:
                stack.pop()
                shown = _render(text, top[0], pos, top[2]) if len(stack) < MAX_EXPAND_DEPTH else None
                (stack[-1][2] if stack else spans).append((top[0], pos, shown))
        if run >= 2:  # closing braces with nothing open: stray markup, never prose
            spans.append((pos, m.end(), None))
    blank_after = -1
    for start, _, children in stack:
        spans.extend(children)  # for _splice to weigh against the unclosed span
        if start < blank_after:
            continue
        blank = text.find("\n\n", start)
        blank_after = len(text) if blank < 0 else blank
        spans.append((start, blank_after, None))
    return _splice(text, spans)


def _splice(text: str, spans: list[tuple[int, int, str | None]]) -> str:
    """Replace each span by its text (None: nothing); a span inside another one goes with it."""
    spans.sort(key=lambda s: (s[0], -s[1]))
    out = []
    pos = 0
    cur_start, cur_end, cur_text = -1, -1, None
    for start, end, repl in spans:
        if start < cur_end:
            if end > cur_end:  # overlapping, not nested: neither replacement is trustworthy
                cur_end, cur_text = end, None
            continue
        if cur_end >= 0:
            out.append(text[pos:cur_start])
            out.append(cur_text or "")
            pos = cur_end
        cur_start, cur_end, cur_text = start, end, repl
    if cur_end >= 0:
        out.append(text[pos:cur_start])
        out.append(cur_text or "")
        pos = cur_end
    out.append(text[pos:])
    return "".join(out)


def _split_args(body: str) -> list[str]:
    """Split a template body on `|`, except inside `[[...]]` (link labels have pipes)."""
    if "[[" not in body:
        return body.split("|")
    args = []
    depth = 0
    start = 0
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == "[" and body.startswith("[[", i):
            depth += 1
            i += 2
            continue
        if c == "]" and body.startswith("]]", i) and depth:
            depth -= 1
            i += 2
            continue
        if c == "|" and not depth:
            args.append(body[start:i])
            start = i + 1
        i += 1
    args.append(body[start:])
    return args


def _render(text: str, start: int, end: int, children: list[tuple[int, int, str | None]]) -> str | None:
    """Visible text of the template at text[start:end], its child templates already rendered."""
    if text.startswith("{{{", start):
        return None
    head_end = min(end - 2, start + 2 + MAX_TEMPLATE_NAME)
    bar = text.find("|", start + 2, head_end)
    if bar < 0 and head_end < end - 2:
        return None
    name = text[start + 2 : bar if bar >= 0 else head_end].strip().lower().replace("_", " ")
    if name not in _EXPANDABLE and not name.startswith("lang-"):
        return None
    pieces = []
    pos = start
    for child_start, child_end, shown in children:  # siblings close, and come, in order
        pieces.append(text[pos:child_start])
        pieces.append(shown or "")
        pos = child_end
    pieces.append(text[pos:end])
    return _expand("".join(pieces), name)


def _expand(body: str, name: str) -> str | None:
    """Visible text of the inline templates that carry words or numbers; None for all others."""
    fixed = _FIXED_TEMPLATES.get(name)
    if fixed is not None:
        return fixed
    parts = _split_args(body[2:-2])
    args = [a.strip() for a in parts[1:]]
    pos = [a for a in args if not _ARG_KEY.match(a)]
    named = {}
    for a in args:
        if _ARG_KEY.match(a):
            key, _, value = a.partition("=")
            key = key.strip().lower()
            # `{{nowrap|1=E = mc2}}`: a numbered argument is a positional one that holds "=".
            if key.isdigit() and 0 < int(key) <= len(pos) + 1:
                pos.insert(int(key) - 1, value.strip())
            else:
                named[key] = value.strip()
    if name in _FIRST_ARG_TEMPLATES or name.startswith("lang-"):
        return pos[0] if pos else None
    if name in _JOIN_TEMPLATES:
        return "".join(pos) or None
    if name in _FLAG_TEMPLATES:
        return named.get("name") or (pos[0] if pos else None)
    if name in ("lang", "rtl-lang"):
        return pos[1] if len(pos) > 1 else None
    if name == "transl":
        return pos[-1] if len(pos) > 1 else None
    if name in ("quote", "cquote", "quotation", "blockquote"):
        return named.get("text") or named.get("quote") or (pos[0] if pos else None)
    if name in ("convert", "cvt"):
        return _expand_convert(pos)
    if name in ("frac", "sfrac", "fraction"):
        # {{frac|3}} is 1/3, {{frac|3|2}} is 3/2, {{frac|1|3|2}} is 1 3/2.
        terms = [f"({a})" if " " in a else a for a in pos]
        if len(terms) == 1:
            return f"1/{terms[0]}"
        return " ".join(terms[:-2] + ["/".join(terms[-2:])]) if terms else None
    if name == "val":
        return _expand_val(pos, named)
    if name in _DATE_TEMPLATES:
        return _expand_date(pos, named)
    if name == "oldstyledate":
        return f"{pos[0]}, {pos[1]}" if len(pos) >= 2 else None
    if name == "sortname":
        return " ".join(pos[:2]) if len(pos) >= 2 else None
    if name in _SHIP_PREFIXES:
        if not pos:
            return None
        return f"{_SHIP_PREFIXES[name]} {pos[0]}" + (f" ({pos[1]})" if len(pos) > 1 else "")
    if name == "music":
        return _MUSIC_SYMBOLS.get(pos[0].lower()) if pos else None
    if name in ("as of", "asof"):
        if not pos:
            return None
        word = "as of" if named.get("lc") in ("y", "yes", "on") else "As of"
        return f"{word} {pos[0]}"
    if name == "e":
        return f"\u00d710^{pos[0]}" if pos else None
    if name == "coord":
        # `display=title` puts the coordinates beside the page title, not in the text.
        return _expand_coord(pos) if "inline" in named.get("display", "inline") else None
    if name in ("railgauge", "rail gauge"):
        return _expand_gauge(pos[0]) if pos else None
    return None


def _expand_coord(pos: list[str]) -> str | None:
    """`{{coord|13|19|N|169|9|W|...}}` is 13°19′N 169°9′W; other forms show nothing."""
    out = []
    numbers: list[str] = []
    for a in pos:
        if a in ("N", "S", "E", "W"):
            out.append("".join(n + unit for n, unit in zip(numbers, "\u00b0\u2032\u2033")) + a)
            numbers = []
        elif _NUMBER.match(a) and len(numbers) < 3:
            numbers.append(a)
        else:
            break
    return " ".join(out) if len(out) == 2 else None


def _expand_gauge(gauge: str) -> str | None:
    """`{{RailGauge|1435mm}}` and its aliases: the gauge in millimetres."""
    gauge = _GAUGE_ALIASES.get(gauge.lower(), gauge)
    digits = gauge[:-2] if gauge.endswith("mm") else gauge
    return f"{digits} mm" if digits.isdigit() else None


def _expand_convert(pos: list[str]) -> str | None:
    if len(pos) < 2 or not _NUMBER.match(pos[0]):
        return None
    value = pos[0]
    rest = pos[1:]
    if len(rest) >= 3 and rest[0] in _RANGE_WORDS and _NUMBER.match(rest[1]):
        value = value + _RANGE_WORDS[rest[0]] + rest[1]
        rest = rest[2:]
    unit = rest[0]
    if _NUMBER.match(unit):
        return None
    out = f"{value} {_UNITS.get(unit, unit)}"
    # `{{convert|6|ft|4|in|cm}}`: a second value and unit before the target unit.
    if len(rest) >= 4 and _NUMBER.match(rest[1]) and not _NUMBER.match(rest[2]):
        out += f" {rest[1]} {_UNITS.get(rest[2], rest[2])}"
    return out


def _expand_val(pos: list[str], named: dict[str, str]) -> str | None:
    """`{{val|6.241|e=18}}` is 6.241×10^18; `{{val|30000|u=C}}` is 30000 C."""
    if not pos or not _NUMBER.match(pos[0]):
        return None
    out = pos[0]
    if len(pos) > 1:
        # `{{val|1.00794|(7)}}` is concise uncertainty, `{{val|1.00794|0.00007}}` is ±.
        out += pos[1] if pos[1].startswith("(") else f" \u00b1 {pos[1]}"
    if named.get("e"):
        out += f"\u00d710^{named['e']}"
    unit = named.get("u") or named.get("ul")
    per = named.get("up") or named.get("upl")
    if unit:
        out += f" {unit}"
    if per:
        out += f"/{per}"
    return out


def _expand_date(pos: list[str], named: dict[str, str]) -> str | None:
    """Year, month and day as the template shows them: "February 12, 1809", or dmy with df=y."""
    if not pos or not pos[0].isdigit():
        return None
    year = pos[0]
    month = int(pos[1]) if len(pos) > 1 and pos[1].isdigit() and 1 <= int(pos[1]) <= 12 else 0
    if not month:
        return year
    day = int(pos[2]) if len(pos) > 2 and pos[2].isdigit() and 1 <= int(pos[2]) <= 31 else 0
    month_name = _MONTHS[month - 1]
    if not day:
        return f"{month_name} {year}"
    if named.get("df", "").lower() in ("y", "yes"):
        return f"{day} {month_name} {year}"
    return f"{month_name} {day}, {year}"


_GAUGE_ALIASES = {"sg": "1435", "ussg": "1435", "standard": "1435", "cape": "1067", "metre": "1000",
                  "ig": "1676", "rg": "1520", "russian": "1520"}
_MONTHS = ("January February March April May June July August September October November"
           " December").split()
_FIXED_TEMPLATES = {
    "ndash": "\u2013", "mdash": "\u2014", "snd": " \u2013 ", "spaced ndash": " \u2013 ",
    "spnd": " \u2013 ", "sndash": " \u2013 ", "spaced en dash": " \u2013 ", "nbsp": " ",
    "space": " ", "spaces": " ", "thinsp": " ", "'": "'", "'s": "'s", "`": "'",
    "c.": "c. ", "circa": "c. ", "ca.": "c. ", "-": "\u2013", "\u2013": "\u2013",
    "mdashb": "\u2014", "spaced mdash": " \u2014 ", "=": "=", "eqm": "\u21cc",
    "' \"": "'\"", "\" '": "\"'",
}
_FIRST_ARG_TEMPLATES = frozenset((
    "nowrap", "nobr", "nobreak", "small", "smaller", "big", "larger", "em", "strong", "sc",
    "smallcaps", "vanchor", "anchor", "visible anchor", "nihongo", "ill", "interlanguage link",
    "nts", "keypress", "key press", "abbr", "tooltip", "sup", "sub", "mvar", "math",
    "var", "angbr", "sic", "bold", "italic", "vr", "script", "large",
    # A phoneme in running text; {{IPA}} and its kin are pronunciations and go.
    "ipaslink", "ipa link",
))
# Templates whose arguments all show, run together.
_JOIN_TEMPLATES = frozenset(("not a typo", "proper name", "linktext", "chem"))
_FLAG_TEMPLATES = frozenset(("flag", "flagcountry", "flagu", "flag country"))
_DATE_TEMPLATES = frozenset((
    "birth date", "birth date and age", "death date", "death date and age", "start date",
    "end date", "start date and age", "birth-date", "death-date", "dob", "bda", "dda",
))
_SHIP_PREFIXES = {"uss": "USS", "hms": "HMS", "hmas": "HMAS", "hmcs": "HMCS", "ss": "SS", "rms": "RMS"}
_MUSIC_SYMBOLS = {"flat": "\u266d", "b": "\u266d", "sharp": "\u266f", "#": "\u266f", "natural": "\u266e"}


_EXPANDABLE = _FIRST_ARG_TEMPLATES | _JOIN_TEMPLATES | _FLAG_TEMPLATES | _DATE_TEMPLATES | set(
    _FIXED_TEMPLATES) | set(_SHIP_PREFIXES) | {
    "lang", "rtl-lang", "transl", "quote", "cquote", "quotation", "blockquote", "convert", "cvt",
    "frac", "sfrac", "fraction", "val", "oldstyledate", "sortname", "music", "as of", "asof", "e",
    "coord", "railgauge", "rail gauge",
}


def _remove_tables(text: str, title: str) -> str:
    """Remove `{| ... |}` tables (nested ones too); an unclosed table ends at a blank line."""
    if "{|" not in text:
        return text
    _refuse_if_over(text.count("{|") + text.count("|}"), MAX_TABLE_MARKS, "table marks", title)
    spans: list[tuple[int, int, str | None]] = []
    depth = 0
    start = 0
    for m in _TABLE_LINE.finditer(text):
        if m.group(1) == "{|":
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                eol = text.find("\n", m.end())
                spans.append((start, len(text) if eol < 0 else eol, None))
    if depth:
        blank = text.find("\n\n", start)
        spans.append((start, len(text) if blank < 0 else blank, None))
    return _splice(text, spans)


def _resolve_links(text: str, title: str, drop_link: re.Pattern) -> str:
    """Replace `[[target|label]]` by its label; drop File/Image/Category/interlanguage links.

    Links are resolved innermost first, so the links inside a File caption are already
    text when the whole File link is dropped.
    """
    # Fast path: two passes over bracket-free links resolve plain links and then the
    # File links whose captions held them; only odd leftovers need the stack below.
    for _ in range(2):
        if "[[" not in text:
            break
        text = _SIMPLE_LINK.sub(lambda m: _link_text(m.group(1), drop_link), text)
    if "[[" not in text and "]]" not in text:
        return text
    stray = text.count("[[") + text.count("]]")
    _refuse_if_over(stray, MAX_STRAY_LINK_BRACKETS, "unbalanced or nested link brackets", title)
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

    Whole-text regexes rather than a loop over lines: a page of millions of short lines
    must not cost a Python iteration each.
    """
    text = _JUNK_LINE.sub("", text)
    text = _LIST_ITEM.sub("\n\\1\n", text) if keep_lists else _LIST_LINE.sub("", text)
    text = "\n".join(p.replace("\n", " ") for p in _BLANK_LINES.split(text) if p)
    return [p for p in _finish(text).split("\n") if _HAS_WORD.search(p)]


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
    # Runs of 2, 3 and 5 apostrophes are italic/bold markup, and longer ones are markup
    # merged across a removed template (`''{{flag|X}}''`): every run goes.
    text = _QUOTES.sub("", text)
    for _ in range(2):  # entities escaped twice in the source (`&amp;nbsp;`) show as text
        if "&" not in text or not _ENTITY.search(text):
            break
        text = html.unescape(text)
    # Invisible characters go, odd spaces become plain ones, runs of them one (in C: five
    # passes of regexes and replaces over the whole text took a fifth of the cleaning).
    text = squeeze_spaces(text)
    # Cheap substring checks first: the regexes try at every "(" of the text.
    if any(needle in text for needle in _PAREN_NEEDLES):
        text = _PAREN_OPEN_SEPARATOR.sub("(", text)
    if any(needle in text for needle in _CLOSE_NEEDLES):
        text = _PAREN_CLOSE_SEPARATOR.sub(")", text)
    if "(" in text:
        text = _EMPTY_PARENS.sub("", text)
    text = _SPACE_BEFORE_PUNCT.sub("", text)
    if "[]" in text:
        text = text.replace("[]", "")
    while ",," in text:
        text = text.replace(",,", ",")
    return squeeze_spaces(text)
