"""bertdata.text.fastpunkt gives NLTK punkt's sentences: compared with NLTK itself (the reference)
on real text of several languages, on NLTK's tricky cases and on generated token soup."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from nltk.tokenize.punkt import PunktSentenceTokenizer

from bertdata.text.articles import article_texts
from bertdata.config import BuildConfig
from bertdata.errors import BertdataError
from bertdata.text.fastpunkt import FastPunkt
from bertdata.text.sentences import PUNKT_MODELS, SentenceSplitter, train_punkt
from bertdata.text.wikidump import iter_pages
from conftest import ROOT, WIKI_FRAGMENT, need
from text_inputs import SOUP, SPACES, pair

TEXTS = ROOT / "tests" / "punkt_texts"
LANGUAGE_TEXTS = sorted(TEXTS.glob("*.txt"))


def test_texts_of_five_languages_and_more_are_there():
    assert len(LANGUAGE_TEXTS) >= 5
    assert all(path.stem in PUNKT_MODELS for path in LANGUAGE_TEXTS)


@pytest.mark.parametrize("path", LANGUAGE_TEXTS, ids=lambda p: p.stem)
def test_each_language_with_its_own_model(path: Path):
    text = path.read_text(encoding="utf-8")
    nltk, fast = pair(path.stem)
    assert fast.tokenize(text) == nltk.tokenize(text)  # whole text, paragraphs and all
    for paragraph in text.splitlines():
        assert fast.tokenize(paragraph) == nltk.tokenize(paragraph)
    # and through the splitter the build uses, glue and all
    ours, theirs = SentenceSplitter(path.stem), SentenceSplitter(path.stem, kind="nltk")
    assert ours.split_article(text) == theirs.split_article(text)


def test_every_model_on_every_language():
    texts = [path.read_text(encoding="utf-8") for path in LANGUAGE_TEXTS]
    for model in PUNKT_MODELS:
        nltk, fast = pair(model)
        for text in texts:
            assert fast.tokenize(text) == nltk.tokenize(text), model


@pytest.mark.parametrize("text", [
    "Dr. Smith moved to the U.S. in 1990. He works at Acme Inc. now.",
    "J. R. R. Tolkien wrote it. I read it. A. Then b. C.",
    "It was 5 p.m. already? Yes! Fine. Really?! No!!! OK.",
    "Wait... what? Wait.. no. And so . . . it ended. Ellipsis... Then lower... then.",
    'He said "Stop." Then he left. (Sent1.) Sent2. [Really.] "Quoted!" she cried.',
    "It is a (test.). It was.\" Next. End.) New. \"Start.\" 'single.' More.",
    "It cost $5.50. The rate was 3.5 per cent. On 12. May. In 1990. the war. 3. The third.",
    "Some animals, e.g. cats, are pets. See Fig. 3 for details. Cf. chap. 4. etc. And more.",
    "The U.S.-based firm. The Jan.-Feb. issue. The well-known co. Ltd. moved. vs. them.",
    "Ends with Dr.", "No period at all", "", "   ", ". . .", "?!", ".", "A.", "a. b. c.",
    "Mr.\u00a0Smith arrived. Mrs.\tJones left.\rThe end.\x0bX. Y.\x0cZ.",
    "Line one.\nLine two.\n\nNew paragraph. Mr.\nSmith. Ends.\n",
    "He went to St. Louis. St. Louis is big. The No. 1 hit. No. It was not.",
    "Word.--Dash. Word.-- dash. Word,. Comma. Semi.; colon.: x. Q.) Z.",
    "1,000. 2.5. -3. .5. 10.000. 1990s. 4th. A.B.C. D.E. f.g.",
    "Über. Ärger. éclair. Ωmega. ñu. ßeta. 中文. 日本。 Text.",
    # the word regex and both passes in C (_punkt.h): a type spelled as the number type, digits of
    # other scripts, an initial that is no digit, multi-character marks, lower-casing that grows
    "The ##number##. Then ##NUMBER##. x. In ١٩٩٠. The ². He ½. We ⅷ. Of a_. B. c-- . d, . . . . e",
    "Go to İSTANBUL. İstanbul. It ΣΑΣ. ΣΑΣ. 1990.\u00a0The x.\u2003Y. (1990.) The. 12.\" Then 'A.' B.",
])
def test_tricky_english(text: str):
    nltk, fast = pair("english")
    assert fast.tokenize(text) == nltk.tokenize(text)


def soup(rng: random.Random) -> str:
    return "".join(rng.choice(SOUP) + rng.choice(SPACES) for _ in range(rng.randint(1, 40)))


@pytest.mark.slow  # 1,500 generated texts per language, each against NLTK
@pytest.mark.parametrize("model", ["english", "german", "russian", "french", "spanish", "polish"])
def test_generated_token_soup(model: str):
    rng = random.Random(f"soup-{model}")
    nltk, fast = pair(model)
    for _ in range(1500):
        text = soup(rng)
        assert fast.tokenize(text) == nltk.tokenize(text), text


def test_trained_parameters():
    params = train_punkt(["Ein Satz. Noch ein Satz. Der Abs. ist kurz.\nDer dritte Satz. Abs. zwei."] * 50)
    nltk, fast = PunktSentenceTokenizer(params), FastPunkt(params)
    rng = random.Random("trained")
    for _ in range(300):
        text = soup(rng)
        assert fast.tokenize(text) == nltk.tokenize(text), text


@pytest.mark.slow  # every word against every tail, ~15 s a model
@pytest.mark.parametrize("model", ["english", "german"])
def test_plain_words_take_the_short_way_to_the_same_decision(model: str):
    """"<letters>. <word>", decided in C without the word regex, as NLTK decides it."""
    nltk, fast = pair(model)
    words = [w for w in SOUP if w[:1].isalpha()] + ["z", "u", "J", "Inc", "dr", "etc", "Abs", "Ltd", "ΑΣ", "İs"]
    tails = ("", ".", ",", ")", '"', "'", ";", "?", "!", "(", "]", "*", ".)", ",,", "..", "-")
    checked = 0
    for word in [w.rstrip(".") for w in words]:
        for following in words:
            for tail in tails:
                text = f"{word}. {following}{tail}"
                assert fast.tokenize(text) == nltk.tokenize(text), text
                checked += 1
    assert checked > 5000


def test_fragment_articles_split_the_same():
    """The real fragment's first 30 articles, paragraph by paragraph (scripts/check_splitter.py
    does every article, and test_languages the whole fragment's bytes)."""
    need(WIKI_FRAGMENT)
    texts = list(itertools.islice(article_texts(iter_pages(WIKI_FRAGMENT)), 30))
    nltk, fast = pair("english")
    sentences = 0
    for text in texts:
        for paragraph in text.split("\n"):
            ours = fast.tokenize(paragraph)
            assert ours == nltk.tokenize(paragraph)
            sentences += len(ours)
    assert sentences > 1000


def test_splitter_choice():
    assert BuildConfig(wiki_only=True).splitter == "fast"
    with pytest.raises(BertdataError, match="--splitter must be fast or nltk"):
        BuildConfig(wiki_only=True, splitter="spacy")
    with pytest.raises(BertdataError, match="no sentence splitter"):
        SentenceSplitter(kind="spacy")
