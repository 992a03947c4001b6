"""bertdata.text.sentences: NLTK punkt English from bundled parameters, no nltk_data needed."""

from __future__ import annotations

import pickle

import pytest

from bertdata.text.sentences import SentenceSplitter, english_parameters, split_article
from conftest import SHARD_A
from text_references import (  # noqa: F401 (collected here; test_fuzz_text reruns them)
    test_tidied_sentences_are_the_python_steps_they_replaced,
)


@pytest.fixture(scope="module")
def splitter() -> SentenceSplitter:
    return SentenceSplitter()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # known abbreviations of the English model do not end a sentence
        (
            "Dr. Smith moved to the U.S. in 1990. He works at Acme Inc. now.",
            ["Dr. Smith moved to the U.S. in 1990.", "He works at Acme Inc. now."],
        ),
        ("The U.S. Army fought. Mr. Jones agreed.", ["The U.S. Army fought.", "Mr. Jones agreed."]),
        ("J. R. R. Tolkien wrote it. I read it.", ["J. R. R. Tolkien wrote it.", "I read it."]),
        ("It was 5 p.m. already? Yes! Fine.", ["It was 5 p.m. already?", "Yes!", "Fine."]),
        # numbers and closing quotes/brackets stay with their sentence
        ("It cost $5.50. The rate was 3.5 per cent.", ["It cost $5.50.", "The rate was 3.5 per cent."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("That was cheap (really.) Fine.", ["That was cheap (really.)", "Fine."]),
        # NLTK's own quirks are kept, because the reference shards were made with them:
        # "e.g." and "i.e." are not in the English model, so they end a sentence.
        ("Some animals, e.g. cats, are pets.", ["Some animals, e.g.", "cats, are pets."]),
        ("See Fig. 3 for details.", ["See Fig.", "3 for details."]),
    ],
)
def test_nltk_style_splits(splitter: SentenceSplitter, text: str, expected: list[str]) -> None:
    assert splitter.split(text) == expected


def test_parameters_are_the_english_punkt_tab_model() -> None:
    params = english_parameters()
    assert {"dr", "mr", "u.s", "inc", "jan", "st"} <= params.abbrev_types
    assert "e.g" not in params.abbrev_types
    assert "however" in params.sent_starters
    assert len(params.ortho_context) > 10_000
    assert params.ortho_context["word-never-seen"] == 0  # a defaultdict, as NLTK expects


def test_split_article_one_sentence_per_item(splitter: SentenceSplitter) -> None:
    text = "First one. Second one.\n\n  \nA list item without period\nThey meant revolt.\". Next."
    assert splitter.split_article(text) == [
        "First one.",
        "Second one.",
        "A list item without period",
        'They meant revolt.".',
        "Next.",
    ]
    # a paragraph never continues into the next one
    assert split_article("Ends with Dr.\nNew paragraph.") == ["Ends with Dr.", "New paragraph."]


def test_closing_punctuation_is_glued_not_a_sentence(splitter: SentenceSplitter) -> None:
    assert splitter.split("It is a (test.).") == ["It is a (test.", ")."]  # plain NLTK
    assert splitter.split_article("It is a (test.).") == ["It is a (test.)."]


def test_pickles_and_rebuilds(splitter: SentenceSplitter) -> None:
    blob = pickle.dumps(splitter)
    assert len(blob) < 200  # a recipe, not 20k dictionary entries
    clone = pickle.loads(blob)
    text = "Mr. Smith went to Washington. He arrived on Jan. 5."
    assert clone.split(text) == splitter.split(text)


def test_matches_the_reference_shard(splitter: SentenceSplitter) -> None:
    """shard_A.txt was split paragraph by paragraph: rejoining two neighbouring lines and
    splitting again gives the same two lines back, unless the pair spans a paragraph's end (no
    end punctuation there, or closing punctuation that punkt attaches only when more text
    follows); and NLTK's own punkt code splits every pair as the default splitter does."""
    nltk = SentenceSplitter(kind="nltk")
    pairs = same = 0
    for document in SHARD_A.read_text(encoding="utf-8").split("\n\n"):
        lines = [line for line in document.split("\n") if line]
        for first, second in zip(lines, lines[1:]):
            pairs += 1
            ours = splitter.split(f"{first} {second}")
            same += ours == [first, second]
            assert ours == nltk.split(f"{first} {second}")
    assert pairs > 8000
    assert same / pairs > 0.99


# -- other languages ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "text", "expected"),
    [
        # German: "z. B." (zum Beispiel) whole only thanks to the row's collocation; "bzw.",
        # "usw.", "Dr." and ordinals ("3. Oktober") are in NLTK's German model.
        ("german", "Viele Städte, z. B. Berlin, haben z. T. einen Hafen. Das ist bekannt.",
         ["Viele Städte, z. B. Berlin, haben z. T. einen Hafen.", "Das ist bekannt."]),
        ("german", "Er wohnt dort bzw. in Köln. Dr. Müller usw. kommen am 3. Oktober. Gut.",
         ["Er wohnt dort bzw. in Köln.", "Dr. Müller usw. kommen am 3. Oktober.", "Gut."]),
        ("german", "Das heißt, d. h. Bonn liegt am Rhein. Das ist alt.",
         ["Das heißt, d. h. Bonn liegt am Rhein.", "Das ist alt."]),
        # Russian: "т. е." (то есть), "г." (год), "ок." (около), "др." (другие), "т. д." mid-sentence.
        ("russian", "Это столица, т. е. главный город. Она основана в 1147 г. князем.",
         ["Это столица, т. е. главный город.", "Она основана в 1147 г. князем."]),
        ("russian", "Там ок. 13 млн человек. Есть музеи, театры и т. д. в центре.",
         ["Там ок. 13 млн человек.", "Есть музеи, театры и т. д. в центре."]),
    ],
)
def test_language_abbreviations(model, text, expected) -> None:
    assert SentenceSplitter(model).split(text) == expected


def test_english_misses_those_abbreviations() -> None:
    # The cases above would fail with the English model: the language matters.
    english = SentenceSplitter()
    assert len(english.split("Er wohnt dort bzw. in Köln.")) == 2
    assert len(english.split("Там ок. 13 млн человек.")) == 2


def test_models_are_nltks_plus_their_rows_collocations() -> None:
    from punkt.data import load_module

    from bertdata.text.sentences import punkt_parameters

    assert punkt_parameters("english").collocations == set(load_module("english").COLLOCATIONS)
    assert punkt_parameters("russian").collocations == set(load_module("russian").COLLOCATIONS)
    assert punkt_parameters("german").collocations - set(load_module("german").COLLOCATIONS) == {
        ("z", "b"), ("z", "t"), ("u", "u"), ("o", "ä"), ("u", "ä")}


def test_choose_punkt() -> None:
    from bertdata.errors import BertdataError
    from bertdata.text.sentences import PUNKT_MODELS, choose_punkt

    assert choose_punkt("en").model == "english" and choose_punkt("simple").model == "english"
    assert choose_punkt("pt").notice == "sentences (pt): punkt model 'portuguese'"
    assert choose_punkt("de", "german").notice == "sentences (de): punkt model 'german' (its own)"
    mk = choose_punkt("mk", "russian")
    assert mk.model == "russian" and mk.notice.endswith("(chosen with --punkt-language)")
    sw = choose_punkt("sw")
    assert sw.model is None and "trained on the dump's own text" in sw.notice and "\n" not in sw.notice
    with pytest.raises(BertdataError, match="no such punkt model"):
        choose_punkt("de", "deutsch")
    assert "english_web" not in PUNKT_MODELS and "german" in PUNKT_MODELS


def test_language_splitter_pickles_as_a_recipe() -> None:
    splitter = SentenceSplitter("german")
    blob = pickle.dumps(splitter)
    assert len(blob) < 200
    text = "Er wohnt dort bzw. in Köln. Gut."
    assert pickle.loads(blob).split(text) == splitter.split(text)


