"""Recipes: the keys checked before any file is looked at, each fault one line naming the recipe and key."""

from __future__ import annotations

import pytest

from bertdata.corpora.recipe import load_recipe
from bertdata.errors import BertdataError

GOOD = b"""
corpora:
  edu:   {type: parquet, files: "fineweb-edu/*.parquet", text: text, id: id, where: "int_score >= 3"}
  dolma: {type: jsonl, files: "dolma/*.json.gz"}
  c4:    {type: jsonl, files: ["c4/a.json.gz", "c4/b.json.gz"], id: url, language: en, min_tokens: 10}
  books: {type: text, files: "books/*.txt"}
  wiki:  {type: wikipedia, dump: enwiki-20261101-pages-articles-multistream.xml.bz2}
mix: {edu: 5, wiki: 2, c4: 2, dolma: 0.5, books: 0.5}
seed: 7
"""


def test_a_recipe_parses_in_its_order_with_shares_summing_to_one():
    recipe = load_recipe("data/mix.yaml", GOOD)
    assert recipe.names == ("edu", "dolma", "c4", "books", "wiki") and recipe.name == "mix" and recipe.seed == 7
    assert dict(recipe.mix) == pytest.approx({"edu": 0.5, "wiki": 0.2, "c4": 0.2, "dolma": 0.05, "books": 0.05})
    edu, _, c4, _, wiki = recipe.corpora
    assert edu.where.source == "int_score >= 3" and edu.id == "id" and edu.text == "text"
    assert c4.files == ("c4/a.json.gz", "c4/b.json.gz") and c4.min_tokens == 10
    assert wiki.files == ("enwiki-20261101-pages-articles-multistream.xml.bz2",)
    assert recipe.record()["corpora"]["edu"]["where"] == "int_score >= 3"


def test_a_mix_leaves_out_the_corpora_it_does_not_name():
    recipe = load_recipe("r.yaml", b"corpora: {a: {type: text, files: x}, b: {type: text, files: y}}\nmix: {b: 1}\n")
    assert recipe.names == ("b",) and recipe.mix == (("b", 1.0),)


@pytest.mark.parametrize("text, said", [
    (b"corpora: [", "r.yaml: not YAML at line"),
    (b"- a\n- b\n", "a recipe is a mapping"),
    (b"corpora: {}\n", "corpora: must name at least one corpus"),
    (b"corpora: {a: {type: text, files: x}}\ndedupe: true\n", "unknown key 'dedupe'"),
    (b"corpora: {a: {type: parqet, files: x}}\n", "corpora.a: type: must be one of parquet, jsonl, text, wikipedia"),
    (b"corpora: {a: {type: text}}\n", "corpora.a: files: must be a path or pattern"),
    (b"corpora: {a: {type: jsonl, files: x, txt: body}}\n", "corpora.a: unknown key 'txt'"),
    (b"corpora: {a: {type: jsonl, files: x, where: 'score >>= 3'}}\n", "corpora.a: where 'score >>= 3'"),
    (b"corpora: {a: {type: jsonl, files: x, min_tokens: -1}}\n", "min_tokens: must be a whole number"),
    (b"corpora: {a: {type: jsonl, files: x, repeat: 0}}\n", "repeat: must be a whole number from 1 to 64"),
    (b"corpora: {a: {type: jsonl, files: x, repeat: 1.5}}\n", "repeat: must be a whole number from 1 to 64"),
    (b"corpora: {a: {type: jsonl, files: x}}\nmix: {b: 1}\n", "mix: names 'b', which corpora: does not define"),
    (b"corpora: {a: {type: jsonl, files: x}}\nmix: {a: 0}\n", "mix: a's share must be a positive number (got 0)"),
    (b"corpora: {a: {type: jsonl, files: x}}\nmix: {a: -1}\n", "a's share must be a positive number"),
    (b"corpora: {a: {type: jsonl, files: x}}\nmix: {a: .nan}\n", "a's share must be a positive number"),
    (b"corpora: {a: {type: jsonl, files: x}}\nseed: -3\n", "seed: must be a whole number"),
    (b"corpora: {a/b: {type: jsonl, files: x}}\n", "'a/b' is not a corpus name"),
    (b"corpora: {w: {type: wikipedia, files: x}}\n", "dump: must name the dump file"),
    (b"corpora: {w: {type: wikipedia, dump: x}, v: {type: wikipedia, dump: y}}\n", "one wikipedia corpus a recipe"),
    (b"[" * 20_000, "r.yaml:"),
])
def test_bad_recipes_are_one_line(text, said):
    with pytest.raises(BertdataError) as err:
        load_recipe("r.yaml", text)
    message = str(err.value)
    assert said in message and "\n" not in message and message.startswith("r.yaml:")
