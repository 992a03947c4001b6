"""`{{convert}}` as the page shows it (issue 47): the unit's symbol, and for temperatures the conversion;
its unit table audited against every unit code in the two real fragments."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from bertdata.text import templates
from bertdata.text.wikidump import iter_pages
from bertdata.text.wikitext import clean
from conftest import TABLE_FRAGMENT, WIKI_FRAGMENT, need


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        # temperature changes: a difference converts without the offset
        ("{{convert|5|C-change|0|abbr=on}}", "5 \u00b0C (9 \u00b0F)"),
        ("{{convert|5|F-change}}", "5 \u00b0F (3 \u00b0C)"),
        ("{{convert|10|K-change}}", "10 K (18 \u00b0F)"),
        ("{{convert|7|\u2013|8|C-change|F-change}}", "7\u20138 \u00b0C (13\u201314 \u00b0F)"),
        ("{{convert|1.5|C-change|F-change}}", "1.5 \u00b0C (2.7 \u00b0F)"),
        # temperatures: as many decimals as the value, three significant digits in kelvins at least
        ("{{convert|525|C|F}}", "525 \u00b0C (977 \u00b0F)"),
        ("{{convert|50.6|\u00b0C|\u00b0F}}", "50.6 \u00b0C (123.1 \u00b0F)"),
        ("{{convert|90|\u00b0F}}", "90 \u00b0F (32 \u00b0C)"),
        ("{{convert|98.6|F}}", "98.6 \u00b0F (37.0 \u00b0C)"),
        ("{{convert|1000|C}}", "1000 \u00b0C (1,830 \u00b0F)"),
        ("{{convert|-40|C}}", "\u221240 \u00b0C (\u221240 \u00b0F)"),
        ("{{convert|300|K}}", "300 K (27 \u00b0C)"),
        ("{{convert|20|C|K}}", "20 \u00b0C (293 K)"),
        ("{{convert|20|C|1}}", "20 \u00b0C (68.0 \u00b0F)"),
        ("{{convert|5|C|disp=flip}}", "41 \u00b0F (5 \u00b0C)"),
        ("{{convert|5|C|disp=or}}", "5 \u00b0C or 41 \u00b0F"),
        ("{{convert|5|C|disp=output number only}}", "41"),
        # other units: the value and the unit's symbol
        ("{{convert|2381741|km2|sqmi|0}}", "2381741 km\u00b2"),
        ("{{convert|15700|ft3|disp=output number only}}", "15700 cu ft"),
        ("{{convert|2.3|Moilbbl/d}}", "2.3 million bbl/d"),
        ("{{convert|60|and(-)|80|kg}}", "60 and 80 kg"),
        ("{{convert|1.2|PD/sqmi}}", "1.2/sq mi"),
        ("{{convert|1500|km|0|abbr=on}}", "1500 km"),
        ("{{cvt|6|ft|4|in|cm}}", "6 ft 4 in"),
    ],
)
def test_convert_shows_what_the_page_shows(template: str, shown: str) -> None:
    assert clean(f"It is {template} here.") == f"It is {shown} here."


# The codes the audit found to be their own symbols (abbr=on): nothing to map.
OWN_SYMBOLS = frozenset("km m mi mm cm ft in lb kg g ha nmi mph AU ft/s".split())


def _units(path) -> Counter:
    """The unit code of every {{convert}} and {{cvt}} of a dump: its first argument after the value
    (and a range's second value) that is not a number."""
    found: Counter = Counter()
    for page in iter_pages(need(path)):
        for m in re.finditer(r"\{\{\s*(?:convert|cvt)\s*\|([^{}]*)\}\}", page.text, re.IGNORECASE):
            pos = [a.strip() for a in m.group(1).split("|") if "=" not in a]
            rest = pos[1:]
            if len(rest) >= 3 and rest[0] in templates._RANGE_WORDS:
                rest = rest[2:]
            if rest:
                found[rest[0]] += 1
    return found


def test_every_unit_of_the_real_fragments_has_its_symbol() -> None:
    found = _units(WIKI_FRAGMENT) + _units(TABLE_FRAGMENT)
    assert sum(found.values()) > 400 and len(found) > 35
    known = OWN_SYMBOLS | set(templates._UNITS) | set(templates._TEMPERATURES)
    assert set(found) <= known, set(found) - known
    # and each renders with that symbol, never with a code that is not one
    for code in found:
        shown = clean(f"It is {{{{convert|3|{code}}}}} here.")
        symbol = (templates._TEMPERATURES[code].symbol if code in templates._TEMPERATURES
                  else templates._UNITS.get(code, code))
        assert shown.startswith(f"It is 3{'' if symbol.startswith('/') else ' '}{symbol}"), (code, shown)
