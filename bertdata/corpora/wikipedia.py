"""A Wikipedia dump as a corpus: read, cleaned (the wikitext cleaner) and split by the text
stage's own dump reading, in byte ranges of a multistream dump, exactly as `--wiki-only` does; a
document's id is its page id. One a recipe."""

from __future__ import annotations

from bertdata.corpora.contract import CorpusSpec, CorpusType
from bertdata.errors import BertdataError


class Wikipedia(CorpusType):
    name = "wikipedia"
    describe = ("a Wikipedia dump (dump:, and index: where it is not beside it), cleaned as --wiki-only cleans "
                "it; a document's id is its page id")
    keys = ("dump", "index")
    # The text stage reads it as it reads --dump (bertdata.pipelines.stages.text): in byte ranges, with
    # the wikitext cleaner, not through `documents`.
    reads_dump = True

    def files(self, spec: CorpusSpec, match) -> list[str]:
        if not match(spec.files[0]):
            raise BertdataError(f"corpus {spec.name}: dump file not found: {spec.files[0]}")
        return [spec.files[0]]


TYPE = Wikipedia()
