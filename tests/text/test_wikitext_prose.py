"""bertdata.text.wikitext: prose only, and the inline templates that carry words.

Snippets are copied from the real dump fragment in ../shared/data/wiki; the article each
comes from is named beside it. Synthetic cases say so.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from bertdata.text import wikitext
from bertdata.text.wikitext import clean


from bertdata.text.skipped import DisambiguationPage, ListPage, SkippedPage


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Alkane
        (
            "the angle of cos<sup>−1</sup>(−{{frac|3}})&nbsp;≈&nbsp;109.47° between them.",
            "the angle of cos−1(−1/3) ≈ 109.47° between them.",
        ),
        # Alkane (the formula line is a `:` line there; here it is prose)
        (
            "Burning takes ({{frac|3|2}}''n''&nbsp;+&nbsp;{{frac|2}})&nbsp;O<sub>2</sub> or "
            "({{sfrac|3''n'' + 1|2}})&nbsp;O<sub>2</sub>.",
            "Burning takes (3/2n + 1/2) O2 or ((3n + 1)/2) O2.",
        ),
        # synthetic: the mixed number of the issue
        ("{{frac|1|3|2}} cups.", "1 3/2 cups."),
    ],
)
def test_fractions(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Ampere
        (
            "The ampere is equivalent to one [[coulomb]] (roughly {{val|6.241|e=18}} times the "
            "[[elementary charge]]) per second.",
            "The ampere is equivalent to one coulomb (roughly 6.241×10^18 times the elementary charge) per second.",
        ),
        # Ampere
        ('the [[battery (electricity)|battery]] charge is {{val|30000|u=C}}".',
         'the battery charge is 30000 C".'),
        # Alkali metal
        (
            "For instance, {{val|1.00794|(7)}} stands for {{val|1.00794|0.00007}}.",
            "For instance, 1.00794(7) stands for 1.00794 ± 0.00007.",
        ),
        # Alkali metal
        ("The mass of the Earth is approximately 5.98{{e|24}}&nbsp;kg.",
         "The mass of the Earth is approximately 5.98×10^24 kg."),
    ],
)
def test_numbers(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Abraham Lincoln (infobox values, here in a sentence)
        ("Born {{birth date|1809|2|12}}.", "Born February 12, 1809."),
        ("Died {{death date and age|1865|4|15|1809|2|12}}.", "Died April 15, 1865."),
        # Alain Connes
        ("Born {{birth date and age|1947|04|01|df=y}}.", "Born 1 April 1947."),
        # Ayn Rand
        ("Died {{death date and age|mf=yes|1982|03|06|1905|02|02}}.", "Died March 6, 1982."),
        # Academy Awards
        ("First held {{Start date and age|1929|5|16}}.", "First held May 16, 1929."),
        # synthetic: year and month only
        ("Opened {{start date|1929|5}}; closed {{end date|1931}}.", "Opened May 1929; closed 1931."),
    ],
)
def test_dates(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Albert Einstein: two pronunciations, a reference and a separator between them
        (
            "'''Albert Einstein''' ({{IPAc-en|ˈ|aɪ|n|s|t|aɪ|n}};<ref>{{cite book|last=Wells|first=John"
            "|title=Longman Pronunciation Dictionary}}</ref> {{IPA-de|ˈalbɛɐ̯t ˈaɪnʃtaɪn|lang|Albert Einstein german.ogg}};"
            " 14 March 1879&nbsp;– 18 April 1955) was a German-born theoretical physicist.",
            "Albert Einstein (14 March 1879 – 18 April 1955) was a German-born theoretical physicist.",
        ),
        # Achilles
        (
            "'''Achilles''' ({{IPAc-en|ə|ˈ|k|ɪ|l|iː|z}}; {{lang-grc|Ἀχιλλεύς}}, ''Akhilleus'', "
            "{{IPA-el|akʰilːéu̯s|pron}}) was a [[Greeks|Greek]] hero of the [[Trojan War]].",
            "Achilles (Ἀχιλλεύς, Akhilleus) was a Greek hero of the Trojan War.",
        ),
        # ASCII: pronunciation and respelling are all the brackets held
        (
            "'''ASCII''' ({{IPAc-en|audio=En-us-ASCII.ogg|ˈ|æ|s|k|i}} {{respell|ASS|kee}}), abbreviated from "
            "'''American Standard Code for Information Interchange''', is a code.",
            "ASCII, abbreviated from American Standard Code for Information Interchange, is a code.",
        ),
        # Albedo
        (
            "'''Albedo''' ({{IPAc-en|æ|l|ˈ|b|iː|d|oʊ}}) or '''reflection coefficient''' is a measure.",
            "Albedo or reflection coefficient is a measure.",
        ),
        # Asphalt (shortened: its second pronunciation, "occasionally {{IPAc-en|...}}", is left out)
        (
            "'''Asphalt''' ({{IPAc-en|US|ˈ|æ|s|f|ɔː|l|t|audio=en-us-asphalt.ogg}}, "
            "{{IPAc-en|UK|ˈ|æ|s|f|æ|l|t}},<ref>Merriam-Webster</ref> also known as bitumen) is sticky.",
            "Asphalt (also known as bitumen) is sticky.",
        ),
        # Ayn Rand: Old Style date and a Russian name stay
        (
            "'''Ayn Rand''' ({{IPAc-en|ˈ|aɪ|n|_|ˈ|r|æ|n|d}};<ref>{{harvnb|Branden|1986|p=71}}</ref> born "
            "'''Alisa Zinov'yevna Rosenbaum''', {{lang-ru|Али́са Зино́вьевна Розенба́ум}}; "
            "{{OldStyleDate|February 2|1905|January 20}}&nbsp;– March 6, 1982) was a Russian-American novelist.",
            "Ayn Rand (born Alisa Zinov'yevna Rosenbaum, Али́са Зино́вьевна Розенба́ум; February 2, 1905 – "
            "March 6, 1982) was a Russian-American novelist.",
        ),
        # Apollo
        (
            "'''Phoebus''' ({{IPAc-en|ˈ|f|iː|b|ə|s}} {{respell|FEE|bəs}}; {{lang|grc|Φοῖβος}}, ''Phoibos'', "
            'literally "bright"), which was very commonly used.',
            'Phoebus (Φοῖβος, Phoibos, literally "bright"), which was very commonly used.',
        ),
        # Alabama
        (
            "'''Alabama''' ({{IPAc-en|audio=en-us-Alabama.ogg|ˌ|æ|l|ə|ˈ|b|æ|m|ə}}) is a [[U.S. state|state]].",
            "Alabama is a state.",
        ),
    ],
)
def test_pronunciations_go_with_their_brackets(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Anarchism
        ("from the Greek {{lang|grc|ἀναρχία}}, i.e. ''anarchy''.", "from the Greek ἀναρχία, i.e. anarchy."),
        # Algeria
        (
            "'''Algeria''' ({{lang-ar|الجزائر}} ''{{transl|ar|al-Jazā'ir}}''; {{lang-ber|ⵍⵣⵣⴰⵢⴻⵔ}} ''Dzayer''), "
            "officially '''People's Democratic Republic of Algeria''', is a country.",
            "Algeria (الجزائر al-Jazā'ir; ⵍⵣⵣⴰⵢⴻⵔ Dzayer), officially People's Democratic Republic of Algeria,"
            " is a country.",
        ),
        # Ayn Rand (infobox value)
        ("Born {{nowrap|Alisa Zinov'yevna Rosenbaum}}.", "Born Alisa Zinov'yevna Rosenbaum."),
        # Alabama: the name shown, not the link target
        ("It borders {{flag|Georgia (U.S. state)|name=Georgia}} and {{flag|Florida}}.",
         "It borders Georgia and Florida."),
        # Algeria: a bare flag icon is a picture, and goes with its brackets
        ("Morocco ({{flagicon|MAR}}) lies west.", "Morocco lies west."),
        # synthetic
        ("Directed by {{sortname|Allan|Dwan}} in {{flagcountry|USA}}.", "Directed by Allan Dwan in USA."),
        # synthetic: math templates keep the formula's text
        ("Let {{mvar|x}} be {{math|2''x'' + 1}}.", "Let x be 2x + 1."),
        # Aikido: a bare {{sic}} marks the quotation, it is not a word of it
        ("were the fundamentals {{sic}} of the paradigm that he demonstrated.",
         "were the fundamentals of the paradigm that he demonstrated."),
        # synthetic
        ("The {{not a typo|colour}} and {{sic|teh}} stay.", "The colour and teh stay."),
        # A
        ("(usually when {{vr|a}} is followed by one consonant)", "(usually when a is followed by one consonant)"),
        # An American in Paris
        ("the notes A{{Music|flat}}<sub>4</sub>, B{{Music|flat}}<sub>4</sub>, D<sub>5</sub>.",
         "the notes A♭4, B♭4, D5."),
        # Apollo 11
        ("from the recovery ship, {{USS|Hornet|CV-12|6}}.", "from the recovery ship, USS Hornet (CV-12)."),
        # Apollo 11
        ("splashed down {{convert|380|km|nmi|abbr=on}} south.", "splashed down 380 km south."),
        # Apollo 11
        (
            "just before dawn local time (16:51 UTC) at {{Coord|13|19|N|169|9|W|type:event|name=Apollo 11 splashdown}}, "
            "in the Pacific Ocean.",
            "just before dawn local time (16:51 UTC) at 13°19′N 169°9′W, in the Pacific Ocean.",
        ),
        # Angola
        ("Angola is a country.\n{{coord|12|30|S|18|30|E|display=title}}", "Angola is a country."),
        # Andorra
        ("east of Andorra which is on the {{RailGauge|1435mm}}[[Standard gauge|-gauge]] line.",
         "east of Andorra which is on the 1435 mm-gauge line."),
        # Albert Einstein: a numbered argument holding "="
        ("his formula {{nowrap|1=''E'' = ''mc''2}} (which has been dubbed", "his formula E = mc2 (which has been dubbed"),
        # Atomic number
        ("the hydrogen atom ({{nowrap|''Z'' {{=}} 1}}) or a hydrogen-like ion", "the hydrogen atom (Z = 1) or a hydrogen-like ion"),
        # Acid
        ("in the form HA {{eqm}} H+ + A−, where HA represents", "in the form HA ⇌ H+ + A−, where HA represents"),
        # Anthropology: templates inside templates
        ("''ánthrōpos'' ({{lang|grc|{{linktext|ἄνθρωπος}}}}, \"[[human]]\")",
         'ánthrōpos (ἄνθρωπος, "human")'),
        # Aristotle
        ("known as the First Teacher ({{lang-ar|{{big|المعلم الأول}}}}).",
         "known as the First Teacher (المعلم الأول)."),
        # A: the IPA inside goes, and the brackets with it
        ("{{angbr|{{IPA|a}}}} is used for the [[open front unrounded vowel]].",
         "is used for the open front unrounded vowel."),
    ],
)
def test_words_in_templates(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("A ( ; ; x) b.", "A (x) b."),
        ("A (x, ; ) b.", "A (x) b."),
        ("A (, ;) b , c ,d.", "A b, c,d."),
        ("A ( – ) b.", "A b."),
    ],
)
def test_separators_left_in_brackets(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected


# Achilles
ACHILLES_FILMS = (
    "The role of Achilles has been played in film by:\n"
    "* [[Brad Pitt]] in ''[[Troy (film)|Troy]]'' (2004)\n"
    "* Joseph Mascolo in ''Achilles'' (1962)\n"
    "\n"
    "Achilles has also been the subject of plays."
)


def test_lists_and_their_lead_in_are_dropped_by_default() -> None:
    assert clean(ACHILLES_FILMS) == "Achilles has also been the subject of plays."
    # A lead-in after prose in the same paragraph goes alone.
    assert clean("He was a hero. His films:\n* One\n\nMore.") == "He was a hero.\nMore."


def test_keep_lists() -> None:
    assert clean(ACHILLES_FILMS, keep_lists=True) == (
        "The role of Achilles has been played in film by:\nBrad Pitt in Troy (2004)\n"
        "Joseph Mascolo in Achilles (1962)\nAchilles has also been the subject of plays."
    )
    assert clean("* one\n** two\n# three\n#: four\n; term\n: definition", keep_lists=True) == (
        "one\ntwo\nthree\nfour\nterm\ndefinition"
    )


# A disambiguation entry each: `* [[target]], what it is`.
_ENTRIES = "".join(f"* [[Austin, {place}]], a city in {place}\n" for place in ("Texas", "Minnesota", "Nevada"))


@pytest.mark.parametrize(
    ("title", "text"),
    [
        ("Ada", "'''Ada''' may refer to:\n{{TOC right}}\n\n==Food==\n* [[Ada (food)]]\n\n{{Disambiguation|geo|hndis}}"),
        ("Aa River", "'''Aa''' is the name of many rivers.\n* [[Aare]], a river in Switzerland\n"
                     "* [[Aa (Meuse)]], a river\n\n{{geodis}}"),
        ("Austin (disambiguation)", "'''Austin''' is a city.\n" + _ENTRIES),
        ("X", "Text.\n" + _ENTRIES + "{{dab}}"),
        ("X", "Text.\n" + _ENTRIES + "{{ Disambig }}"),
        ("X", "Text.\n" + _ENTRIES + "{{hndis|name=Smith, John}}"),
        ("X", "Text.\n" + _ENTRIES + "{{surname}}"),
        ("X", "Text.\n" + _ENTRIES + "{{Set index article}}"),
        # Alien, less its template: the first paragraph says what it is
        ("Alien", "{{Wiktionary|alien|aliens}}\n'''Alien''' or '''Aliens''' may refer to:\n* [[Extraterrestrial life]]"),
        # the lead-in counts with the list it introduces
        ("Asia Minor (disambiguation)", "'''Asia Minor''' is another name for [[Anatolia]]. It may also refer to:\n"
                                        "* [[Asia Minor (album)|''Asia Minor'']], an album\n{{Disambiguation}}"),
    ],
)
def test_disambiguation_pages_are_skipped(title: str, text: str) -> None:
    with pytest.raises(DisambiguationPage, match="its list items outweigh its prose"):
        clean(text, title)
    with pytest.raises(DisambiguationPage):
        clean(text, title, keep_lists=True)


PROSE = ("'''Austin''' is the capital of the U.S. state of Texas. It is the seat of Travis County, on the "
         "Colorado River, and the fourth-largest city in the state.\n\n")


@pytest.mark.parametrize(
    ("title", "text"),
    [
        ("Austin (disambiguation)", PROSE + _ENTRIES),
        ("Austin", PROSE + _ENTRIES + "{{disambiguation}}"),
        ("Austin", PROSE + "'''Austin''' may refer to:\n* [[Austin, Texas]]"),
        ("List of Austins", PROSE + _ENTRIES),
        # indented prose and definitions are prose; a template alone on its line and headings are neither
        ("Austin (disambiguation)", "; Austin : The capital of Texas, and the seat of Travis County.\n"
                                    ": It lies on the Colorado River.\n== Cities ==\n{{Infobox|name=Austin}}\n"
                                    "* [[Austin, Texas]]"),
    ],
)
def test_pages_that_say_they_are_lists_are_kept_when_mostly_prose(title: str, text: str) -> None:
    kept = clean(text, title)
    assert "Minnesota" not in kept and ("Austin is the capital" in kept or "The capital of Texas" in kept), kept


def test_list_pages_are_skipped_unless_lists_are_kept() -> None:
    text = "This is a list of anthropologists.\n* [[Franz Boas]]\n* [[Margaret Mead]]"
    with pytest.raises(ListPage, match="'List of anthropologists' is a list: its list items outweigh its prose"):
        clean(text, "List of anthropologists")
    with pytest.raises(ListPage):
        clean(text, "Lists of people")
    assert clean(text, "List of anthropologists", keep_lists=True) == (
        "This is a list of anthropologists.\nFranz Boas\nMargaret Mead")
    # a prose article whose title merely mentions a list
    assert clean("A list is a sequence.", "List") == "A list is a sequence."
    assert clean("It may refer to: anything.", "Reference") == "It may refer to: anything."
    # a page of mostly list items whose title does not say it is a list keeps its prose
    assert clean("He directed films.\n" + _ENTRIES, "Allan Dwan") == "He directed films."


def test_skip_reasons() -> None:
    assert ListPage.reason == "list_page" and DisambiguationPage.reason == "disambiguation"
    assert isinstance(wikitext.RULES_VERSION, (int, str))


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [
        " ;" * 2_500_000 + ")",
        "(" + " ;" * 2_500_000,
        "( ;" * 3_000_000,
        "x:" * 3_000_000,
        "{{nowrap|" * 200_000 + "y" + "}}" * 200_000,
        "{{frac|1 2|3 4}}" * 200_000,
        "{{val|1|e=2|u=m}}" * 200_000,
        "{{" * 200_000 + "x" * 5_000_000 + "}}" * 200_000,
        ": A line.\n" * 500_000,
        "; term : A definition.\n" * 250_000,
        ";" * 5_000_000,
    ],
)
def test_new_rules_stay_linear(page: str) -> None:
    start = time.perf_counter()
    clean(page, max_chars=None)
    # as a page that says it is a list, measured before it is cleaned
    with contextlib.suppress(SkippedPage):
        clean(page, "List of lines", max_chars=None)
    assert time.perf_counter() - start < 20


def test_page_document_counts_skips_by_reason_and_passes_keep_lists() -> None:
    from collections import Counter

    from bertdata.text.articles import page_document
    from bertdata.text.sentences import default_splitter
    from bertdata.text.wikidump import Page

    counts: Counter = Counter()
    pages = [
        Page(1, "List of anthropologists", 0, "This is a list.\n* [[Franz Boas]]\n* [[Margaret Mead]]"),
        Page(2, "Ada", 0, "'''Ada''' may refer to:\n* [[Ada (food)]]\n\n{{Disambiguation|geo|hndis}}"),
        Page(3, "Achilles", 0, ACHILLES_FILMS),
    ]
    docs = [page_document(p, default_splitter(), 5_000_000, counts) for p in pages]
    assert docs[:2] == [None, None]
    assert docs[2].sentences == ("Achilles has also been the subject of plays.",)
    assert counts["skipped_list_page"] == 1 and counts["skipped_disambiguation"] == 1 and counts["articles"] == 1

    kept: Counter = Counter()
    docs = [page_document(p, default_splitter(), 5_000_000, kept, keep_lists=True) for p in pages]
    assert docs[0].sentences == ("This is a list.", "Franz Boas", "Margaret Mead")
    assert docs[1] is None and kept["skipped_disambiguation"] == 1
    assert "Brad Pitt in Troy (2004)" in docs[2].sentences
