"""The dedup core (bertdata/dedup): word and n-gram hashes, MinHash against the true Jaccard,
band matches, clusters and their rule, evaluation sets, and the recipe's dedup keys."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from bertdata.corpora.recipe import parse_recipe
from bertdata.dedup.clusters import components
from bertdata.dedup.evals import EvalSet, EvalTable, flag_decontamination, flag_set, rows, type_of
from bertdata.dedup.minhash import DedupConfig, Signer, exact_key, similarity
from bertdata.dedup.signatures import GroupSignatures, band_slice, matches
from bertdata.dedup.words import ngram_hashes, word_hashes
from bertdata.errors import BertdataError

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _vocabulary(rng: random.Random, n: int = 5000) -> list[str]:
    return ["".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 9))) for _ in range(n)]


def true_jaccard(a: list[str], b: list[str], n: int = 5) -> float:
    sa = {tuple(a[i:i + n]) for i in range(len(a) - n + 1)}
    sb = {tuple(b[i:i + n]) for i in range(len(b) - n + 1)}
    return len(sa & sb) / len(sa | sb)


def test_words_ignore_case_punctuation_and_spacing_and_hash_the_same_in_any_process():
    a = word_hashes("The café, it said -- is OPEN.\nToday!")
    assert np.array_equal(a, word_hashes("the  CAFÉ it said is open today"))
    assert len(a) == 7 and len(set(a.tolist())) == 7
    # Fixed values: a hash that changed with the process (Python's str hash) would fail here.
    assert word_hashes("bert")[0] == word_hashes("x bert y")[1]
    assert int(word_hashes("bert")[0]) == 15725437797123863214


def test_an_ngram_is_its_words_in_order():
    words = word_hashes("a b c d e f")
    grams = ngram_hashes(words, 3)
    assert len(grams) == 4 and len(set(grams.tolist())) == 4
    assert not np.array_equal(ngram_hashes(word_hashes("a b c"), 3), ngram_hashes(word_hashes("c b a"), 3))
    assert len(ngram_hashes(words, 7)) == 0
    with pytest.raises(ValueError):
        ngram_hashes(words, 0)


def test_minhash_estimates_the_true_jaccard_without_bias():
    rng = random.Random(7)
    vocabulary = _vocabulary(rng)
    errors = []
    for seed in range(20):
        signer = Signer(DedupConfig(seed=seed))
        a = [rng.choice(vocabulary) for _ in range(400)]
        b = [w if rng.random() > 0.05 else rng.choice(vocabulary) for w in a]
        errors.append(similarity(signer.signature(" ".join(a)), signer.signature(" ".join(b))) - true_jaccard(a, b))
    assert abs(np.mean(errors)) < 0.03 and np.std(errors) < 0.07


def test_a_signature_is_the_same_for_the_same_text_and_seed_and_short_texts_have_one():
    signer = Signer(DedupConfig())
    text = "one two three four five six seven"
    assert np.array_equal(signer.signature(text), Signer(DedupConfig()).signature(text))
    assert not np.array_equal(signer.signature(text), Signer(DedupConfig(seed=2)).signature(text))
    short = signer.signature("two words")
    assert np.array_equal(short, signer.signature("Two, words!")) and not np.array_equal(short, signer.signature(""))
    assert signer.signature("").max() == np.iinfo(np.uint32).max


def test_exact_keys_ignore_where_sentences_were_split_only():
    assert exact_key(b"a b\nc") == exact_key(b"a b c") == exact_key(b"a\nb c")
    assert exact_key(b"a b c") != exact_key(b"A b c") and exact_key(b"a b c") != exact_key(b"a  b c")


@pytest.mark.parametrize("given, said", [
    ({"minhash": {"bands": 100, "rows": 100}}, "bands x rows is 10,000 hash functions, beyond reason"),
    ({"minhash": {"ngram": 0}}, "ngram must be a whole number from 1 to 64 (got 0)"),
    ({"minhash": {"rows": "8"}}, "rows must be a whole number of 1 or more"),
    ({"minhash": {"shingles": 5}}, "dedup: minhash: unknown key 'shingles'"),
    ({"fuzzy": True}, "dedup: unknown key 'fuzzy'"),
    ({"minhash": {"min_similarity": 1.5}}, "min_similarity must be a number from 0 to 1 (got 1.5)"),
    ({"exact": False}, "asks for neither exact: nor minhash:"),
    ("yes", "dedup: is true, or a mapping"),
])
def test_a_bad_dedup_key_is_one_line_naming_the_recipe(given, said):
    with pytest.raises(BertdataError) as err:
        parse_recipe("r.yaml", {"corpora": {"a": {"type": "jsonl", "files": "a.jsonl"}}, "dedup": given})
    assert str(err.value).startswith("r.yaml: ") and said in str(err.value)


@pytest.mark.parametrize("given, said", [
    ({"ngram": 0, "against": [{"files": "e.jsonl", "text": "t"}]}, "ngram must be a whole number from 1 to 64"),
    ({"against": []}, "against: is a list of evaluation sets"),
    ({"against": [{"files": "g.tsv", "type": "tsv"}]}, "a tsv evaluation set names its text column or key"),
    ({"against": [{"files": "g.tsv", "type": "csv", "text": "s"}]}, "type: must be one of squad, tsv"),
    ({"ngram": 13}, "decontaminate: is a mapping with against:"),
])
def test_a_bad_decontaminate_key_is_one_line(given, said):
    with pytest.raises(BertdataError) as err:
        parse_recipe("r.yaml", {"corpora": {"a": {"type": "jsonl", "files": "a.jsonl"}}, "decontaminate": given})
    assert str(err.value).startswith("r.yaml: ") and said in str(err.value)


def test_dedup_true_is_datatroves_parameters_and_the_record_holds_them():
    recipe = parse_recipe("r.yaml", {"corpora": {"a": {"type": "jsonl", "files": "a.jsonl"}}, "dedup": True})
    assert recipe.dedup == DedupConfig(exact=True, minhash=True, ngram=5, bands=14, rows=8, min_similarity=0.6)
    assert 0.7 < recipe.dedup.threshold < 0.75
    assert recipe.record()["dedup"]["minhash"]["bands"] == 14
    assert "dedup" not in parse_recipe("r.yaml", {"corpora": {"a": {"type": "jsonl", "files": "x"}}}).record()


def test_matches_pair_every_document_of_a_key_with_its_first():
    def part(number, keys, docs):
        return number, np.array(keys, "<u8").tobytes(), np.array(docs, "<u4").tobytes()

    pairs = matches([part(0, [1, 5, 9], [0, 1, 2]), part(1, [5, 9, 9], [0, 1, 2])])
    ref = lambda f, d: (f << 32) | d  # noqa: E731
    assert sorted(map(tuple, pairs.tolist())) == sorted([(ref(0, 1), ref(1, 0)), (ref(0, 2), ref(1, 1)),
                                                         (ref(0, 2), ref(1, 2))])
    assert len(matches([part(0, [1, 2], [0, 1])])) == 0


def test_a_groups_bands_file_holds_each_band_sorted_where_band_slice_says():
    signer = Signer(DedupConfig(bands=3, rows=2))
    group = GroupSignatures(signer, exact=True)
    texts = ["alpha beta gamma delta epsilon zeta", "one two three four five six", "alpha beta gamma delta epsilon zeta"]
    for n, text in enumerate(texts):
        group.add((0, f"d{n}"), ("training", 0), 0, text.encode())
    bands, _, starts = group.render()
    assert starts.shape == (4, 257) and (starts[:, -1] == 3).all()
    for band in range(4):
        (ko, kl), (do, dl) = band_slice(3, band, 0, 3)
        keys = np.frombuffer(bands[ko:ko + kl], "<u8")
        docs = np.frombuffer(bands[do:do + dl], "<u4")
        assert (np.diff(keys.astype(np.float64)) >= 0).all() and sorted(docs.tolist()) == [0, 1, 2]
        assert keys[list(docs).index(0)] == keys[list(docs).index(2)]


def test_clusters_are_connected_components():
    assert components(np.array([[1, 2], [3, 2], [5, 6], [2, 1]])) == {1: [1, 2, 3], 5: [5, 6]}
    assert components(np.zeros((0, 2), dtype=np.int64)) == {}


def _squad(contexts: list[str]) -> bytes:
    return json.dumps({"data": [{"paragraphs": [{"context": c, "qas": [{"question": "What is it all about then?"}]}
                                                for c in contexts]}]}).encode()


LONG = "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm afternoon sun"


def test_an_eval_table_finds_the_row_a_document_shares_an_ngram_with():
    table = EvalTable(13, [("dev.json", "squad", None, _squad(["nothing to see here", LONG])),
                           ("glue.tsv", "tsv", "sentence", b"sentence\tlabel\nshort one\t1\n" +
                            ("a " * 20).encode() + b"\t0\n")])
    assert table.hit("Intro. The quick brown fox jumps over the lazy dog, while the cat sleeps in the warm! end") == (
        0, "data[0].paragraphs[1].context")
    assert table.hit("the quick brown fox jumps over the lazy dog") is None
    assert table.hit(("a " * 13).strip()) == (1, "line 3")
    assert table.short == [3, 1]  # rows of fewer words than the n-gram: counted, not checked


@pytest.mark.parametrize("name, kind, key, data, said", [
    ("dev.json", "squad", None, b'{"version": 1}', "not a SQuAD file"),
    ("dev.json", "squad", None, b"{", "not a SQuAD file"),
    ("g.tsv", "tsv", "sentence", b"text\tlabel\nx\t1\n", "no column 'sentence' in its header (text, label)"),
    ("e.jsonl", "jsonl", "context", b'{"context": "a"}\n{"other": 1}\n', "record 1 has no key 'context'"),
    ("e.jsonl", "jsonl", "context", b"{not json\n", "not JSONL"),
    ("e.jsonl", "jsonl", "context", b'{"context": "too short"}\n', "holds no evaluation text of 13+ words"),
])
def test_a_bad_eval_file_is_one_line_naming_it(name, kind, key, data, said):
    with pytest.raises(BertdataError) as err:
        EvalTable(13, [(name, kind, key, data)])
    assert str(err.value).startswith(f"{name}: ") and said in str(err.value)


def test_an_eval_files_type_comes_from_its_name_unless_given():
    assert type_of("glue/sst2/dev.tsv", None) == "tsv" and type_of("x.json", "squad") == "squad"
    assert type_of("e.parquet", None) == "parquet"
    with pytest.raises(BertdataError, match="e.txt: no type: given"):
        type_of("e.txt", None)
    assert list(rows("e.json", "json", "t", b'{"data": [{"t": "x"}, {"t": "y"}]}')) == [("record 0", "x"),
                                                                                    ("record 1", "y")]


def test_a_decontaminate_flag_value_is_a_squad_file_or_names_its_text():
    assert flag_set("squad/dev-v1.1.json") == EvalSet(("squad/dev-v1.1.json",), "squad")
    assert flag_set("glue/sst2/dev.tsv=sentence") == EvalSet(("glue/sst2/dev.tsv",), "tsv", "sentence")
    assert flag_set("a=b/evals.jsonl=context") == EvalSet(("a=b/evals.jsonl",), "jsonl", "context")
    for value, line in (("dev.tsv", "a tsv file needs its text column or key: dev.tsv=KEY"),
                        ("dev.json=", "FILE or FILE=KEY"), ("dev.txt=text", "no type")):
        with pytest.raises(BertdataError, match=re.escape(line)):
            flag_set(value)
    assert flag_decontamination(()) is None
    assert flag_decontamination(("dev.json",)).ngram == 13
