"""Wikitext templates: removed with a linear scan and an explicit stack, except the few that
show prose (dates, conversions, coordinates, language and name wrappers), which are expanded
to the text a reader sees. Nested templates deeper than `MAX_EXPAND_DEPTH` are dropped."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from bertdata.text._markup import template_spans
from bertdata.text._spans import splice
from bertdata.text.skipped import MAX_EXPAND_DEPTH, MAX_TEMPLATE_BRACES, MAX_TEMPLATE_NAME, refuse_if_over

_ARG_KEY = re.compile(r"[\w -]+=")  # on stripped arguments

_NUMBER = re.compile(r"[-+\u2212]?(?=\.?\d)[\d,]*(?:\.\d+)?(?:e-?\d+)?$")

_RANGE_WORDS = {"to": " to ", "and": " and ", "or": " or ", "-": "\u2013", "\u2013": "\u2013",
                "by": " by ", "x": " \u00d7 ", "\u00d7": " \u00d7 ", "+/-": " \u00b1 ", "\u00b1": " \u00b1 ",
                "+": " + ", "and(-)": " and ", "to(-)": " to ", ", and": ", and ", ", or": ", or "}
_PRECISION = re.compile(r"-?\d{1,2}$")

# The symbols `{{convert}}` shows for its unit codes where the code is not the symbol (abbr=on).
# Audited against every code in the two real fragments (docs/text-quality.md, tests/text/test_convert.py):
# the others (km, m, mi, mm, cm, ft, in, lb, kg, g, ha, nmi, mph, AU, ft/s) are their own symbols.
_UNITS = {
    "sqmi": "sq mi", "sqkm": "km\u00b2", "km2": "km\u00b2", "m2": "m\u00b2", "cm2": "cm\u00b2", "mm2": "mm\u00b2",
    "sqft": "sq ft", "sqin": "sq in", "sqyd": "sq yd", "m3": "m\u00b3", "km3": "km\u00b3", "cm3": "cm\u00b3",
    "cuft": "cu ft", "ft3": "cu ft", "cuyd": "cu yd", "cuin": "cu in", "in3": "cu in",
    "acre": "acres", "e3acre": "thousand acres", "e6acre": "million acres", "e3km2": "thousand km\u00b2",
    "e6km2": "million km\u00b2", "e3sqmi": "thousand sq mi", "e6sqmi": "million sq mi", "e6mi": "million mi",
    "e6km": "million km", "e9km": "billion km", "Tcuft": "trillion cu ft", "Bcuft": "billion cu ft",
    "e9m3": "billion m\u00b3", "e6m3": "million m\u00b3", "e9cuft": "billion cu ft", "e6cuft": "million cu ft",
    "oilbbl": "bbl", "koilbbl": "thousand bbl", "Moilbbl": "million bbl", "Goilbbl": "billion bbl",
    "oilbbl/d": "bbl/d", "koilbbl/d": "thousand bbl/d", "Moilbbl/d": "million bbl/d",
    "USgal": "US gal", "impgal": "imp gal", "MUSgal": "million US gal", "Mimpgal": "million imp gal",
    "USqt": "US qt", "USoz": "US fl oz", "L": "L", "Ml": "ML", "ML": "ML",
    "e6carat": "million carats", "carat": "carats", "LT": "long tons", "ST": "short tons", "MT": "t",
    "t": "t", "e6t": "million t", "e6lb": "million lb", "PD/sqmi": "/sq mi", "PD/km2": "/km\u00b2",
    "kn": "kn", "km/h": "km/h", "m/s": "m/s", "hp": "hp", "kW": "kW", "MW": "MW", "GW": "GW",
}


class _Temperature(NamedTuple):
    symbol: str
    scale: float  # kelvins = (value + offset) * scale
    offset: float
    change: bool  # a difference of temperatures: no offset
    default: str  # the code it converts to when the template names none


_TEMPERATURES = {
    "C": _Temperature("\u00b0C", 1.0, 273.15, False, "F"), "F": _Temperature("\u00b0F", 5 / 9, 459.67, False, "C"),
    "K": _Temperature("K", 1.0, 0.0, False, "C"),
    "C-change": _Temperature("\u00b0C", 1.0, 0.0, True, "F-change"),
    "F-change": _Temperature("\u00b0F", 5 / 9, 0.0, True, "C-change"),
    "K-change": _Temperature("K", 1.0, 0.0, True, "F-change"),
}
_TEMPERATURES |= {"\u00b0C": _TEMPERATURES["C"], "\u00b0F": _TEMPERATURES["F"], "degC": _TEMPERATURES["C"],
                  "degF": _TEMPERATURES["F"]}


def remove_templates(text: str, title: str) -> str:
    """Remove `{{...}}` and `{{{...}}}` with MediaWiki's brace-run matching (in C: `_markup`).

    An unclosed `{{` swallows the rest of its paragraph (up to a blank line): the
    alternative, leaving the template's name and parameters as text, is worse.
    """
    if "{{" not in text and "}}" not in text:
        return text
    refuse_if_over(text, ("{{", "}}"), MAX_TEMPLATE_BRACES, "template braces", title)
    spans = template_spans(text, _EXPANDABLE, _EXPANDABLE_PREFIX, MAX_TEMPLATE_NAME, MAX_EXPAND_DEPTH,
                           lambda name, start, end, children: _render(text, name, start, end, children))
    return splice(text, spans)


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


def _render(text: str, name: str, start: int, end: int, children: list[tuple[int, int, str | None]]) -> str | None:
    """Visible text of the template `name` at text[start:end], its child templates already rendered."""
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
    if name in _FIRST_ARG_TEMPLATES or name.startswith(_EXPANDABLE_PREFIX):
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
        return _expand_convert(pos, named)
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


def _expand_convert(pos: list[str], named: dict[str, str]) -> str | None:
    """`{{convert|5|km|mi}}` is 5 km: the value and its unit's symbol (`_UNITS`), a range's two
    values (`{{convert|1|to|2|m}}`), and a second value and unit (`{{convert|6|ft|4|in|cm}}`). A
    temperature or a temperature change also shows its conversion, as the page does:
    `{{convert|5|C-change|0|abbr=on}}` is 5 °C (9 °F) (`_temperature`)."""
    if len(pos) < 2 or not _NUMBER.match(pos[0]):
        return None
    values = [pos[0]]
    joiner = ""
    rest = pos[1:]
    if len(rest) >= 3 and rest[0] in _RANGE_WORDS and _NUMBER.match(rest[1]):
        joiner = _RANGE_WORDS[rest[0]]
        values.append(rest[1])
        rest = rest[2:]
    unit = rest[0]
    if _NUMBER.match(unit):
        return None
    if unit in _TEMPERATURES:
        return _temperature(values, joiner, rest, named.get("disp", ""))
    out = joiner.join(values) + _unit(unit)
    # `{{convert|6|ft|4|in|cm}}`: a second value and unit before the target unit.
    if len(rest) >= 4 and _NUMBER.match(rest[1]) and not _NUMBER.match(rest[2]):
        out += f" {rest[1]}{_unit(rest[2])}"
    return out


def _unit(code: str) -> str:
    """A unit's symbol as it follows its value: after a space, but for one that starts with "/"
    (a density: 1.2/sq mi)."""
    symbol = _UNITS.get(code, code)
    return symbol if symbol.startswith("/") else " " + symbol


def _temperature(values: list[str], joiner: str, rest: list[str], disp: str) -> str:
    """A temperature and its conversion: to the unit named after it, else to its unit's default
    (°C and °F each to the other, kelvins to °C), rounded to the decimals the argument after the
    units gives (`|0|`), else to as many as the value has (a change's whole number to units), and
    for an absolute temperature to three significant digits in kelvins at least (1000 °C is
    1,830 °F); `disp=flip`, `or`, `out` and `output number only` as convert shows them."""
    unit = _TEMPERATURES[rest[0]]
    named = _TEMPERATURES.get(rest[1]) if len(rest) > 1 else None
    target = named if named is not None and named.change == unit.change else _TEMPERATURES[unit.default]
    precision = rest[2 if named is not None else 1] if len(rest) > (2 if named is not None else 1) else ""
    decimals = int(precision) if _PRECISION.match(precision) else None
    shown = []
    for value in values:
        number = float(value.replace(",", "").replace("\u2212", "-"))
        kelvin = (number + unit.offset) * unit.scale
        places = decimals
        if places is None:
            places = _decimals(value)
            if unit.change:
                places = max(places, 0)
            elif abs(kelvin) > 1e-8:
                places = max(places, 2 - math.floor(math.log10(abs(kelvin))))
        shown.append(_format(kelvin / target.scale - target.offset, places))
    source = joiner.join("\u2212" + v[1:] if v.startswith("-") else v for v in values) + " " + unit.symbol
    output = f"{joiner.join(shown)} {target.symbol}"
    if disp == "flip":
        return f"{output} ({source})"
    if disp == "or":
        return f"{source} or {output}"
    if disp in ("out", "output only"):
        return output
    if disp == "output number only":
        return joiner.join(shown)
    return f"{source} ({output})"


def _decimals(value: str) -> int:
    """The decimals a number is written with; less the trailing zeros of a whole number (1000: -3)."""
    number = value.replace(",", "").lower().partition("e")[0]
    whole, dot, fraction = number.partition(".")
    return len(fraction) if dot else -(len(whole) - len(whole.rstrip("0")))


def _format(number: float, places: int) -> str:
    """`number` rounded to `places` decimals (tens for -1), with thousands separated by commas and a
    minus sign, as convert writes it."""
    rounded = round(number, places)
    text = f"{abs(rounded):,.{max(places, 0)}f}"
    return ("\u2212" + text) if rounded < 0 and text.strip("0.,") else text


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

# The templates `_expand` may show: these names, and every name with the prefix.
_EXPANDABLE_PREFIX = "lang-"
_EXPANDABLE = frozenset(_FIRST_ARG_TEMPLATES | _JOIN_TEMPLATES | _FLAG_TEMPLATES | _DATE_TEMPLATES | set(
    _FIXED_TEMPLATES) | set(_SHIP_PREFIXES) | {
    "lang", "rtl-lang", "transl", "quote", "cquote", "quotation", "blockquote", "convert", "cvt",
    "frac", "sfrac", "fraction", "val", "oldstyledate", "sortname", "music", "as of", "asof", "e",
    "coord", "railgauge", "rail gauge",
})
