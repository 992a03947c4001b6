"""The where: filter language: parsed, never evaluated as Python."""

from __future__ import annotations

import pickle

import pytest

from bertdata.corpora.where import parse
from bertdata.errors import BertdataError

ROW = {"int_score": 3, "score": 2.75, "language": "en", "metadata": {"length": 120, "source": "web"}, "none": None}


@pytest.mark.parametrize("source, expected", [
    ("int_score >= 3", True),
    ("int_score > 3", False),
    ("score < 3 and language == 'en'", True),
    ("language != \"en\" or int_score == 3", True),
    ("not int_score == 3", False),
    ("not (int_score == 3 or score > 5)", False),
    ("metadata.length >= 100 and metadata.source == 'web'", True),
    ("1e2 < metadata.length", True),
    ("language > 3", False),  # unordered: false, as in SQL
    ("none == null", True),
    ("none < 3", False),
    ("missing == 1", False),
    ("int_score == true", False),
    ("language == 'it\\'s'", False),
    ("-1 < score", True),
])
def test_comparisons_and_combinations(source, expected):
    assert parse(source).keeps(ROW) is expected


def test_it_names_the_columns_it_reads_and_pickles_as_its_text():
    f = parse("int_score >= 3 and metadata.length < 10 or language == 'de'")
    assert f.columns == ("int_score", "language", "metadata.length")
    again = pickle.loads(pickle.dumps(f))
    assert again.source == f.source and again.keeps(ROW) == f.keeps(ROW)


@pytest.mark.parametrize("source, said", [
    ("", "empty filter"),
    ("int_score >=", "ends too soon"),
    ("int_score 3", "expected a comparison"),
    ("(int_score > 3", "ends too soon"),
    ("(int_score > 3 3", "expected ')'"),
    ("int_score > 3)", "unexpected ')'"),
    ("__import__('os').system('true')", "cannot read"),
    ("int_score > 3 ; drop", "cannot read"),
    ("and > 3", "expected a column or a value"),
])
def test_bad_filters_are_one_line(source, said):
    with pytest.raises(BertdataError) as err:
        parse(source)
    assert said in str(err.value) and "\n" not in str(err.value)
