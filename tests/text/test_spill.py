"""Run files: documents buffered by shard, written as blocks, merged back per shard."""

from __future__ import annotations

import io
import random

from bertdata.text.articles import Document
from bertdata.text.spill import RunBuffer, decode_block, merge_blocks, run_name


def _doc(page_id: int, text: str) -> Document:
    return Document.of((0, page_id), [text, f"{text} again."])


def _drain(buffer: RunBuffer) -> tuple[bytes, dict]:
    f = io.BytesIO()
    blocks = buffer.write_to(f)
    return f.getvalue(), blocks


def test_buffer_reports_full_at_its_limit_and_drains_empty():
    buffer = RunBuffer(limit=200)
    full = [buffer.add(("training", i % 3), _doc(i, "x" * 40 + str(i))) for i in range(40)]
    assert not full[0] and full[-1]
    assert buffer
    data, blocks = _drain(buffer)
    assert not buffer
    assert _drain(buffer) == (b"", {})
    assert sorted(blocks) == [("training", 0), ("training", 1), ("training", 2)]
    # Blocks tile the run in shard order, with no gap.
    offsets = [blocks[k][:2] for k in sorted(blocks)]
    assert offsets[0][0] == 0 and sum(length for _, length in offsets) == len(data)
    for (o1, l1), (o2, _) in zip(offsets, offsets[1:]):
        assert o1 + l1 == o2


def test_blocks_decode_to_the_documents_of_their_shard():
    buffer = RunBuffer()
    docs = {i: _doc(i, f"Page {i}.") for i in range(30)}
    for i, doc in docs.items():
        buffer.add(("test" if i % 5 == 0 else "training", i % 2), doc)
    data, blocks = _drain(buffer)
    seen = {}
    for shard, (offset, length, count) in blocks.items():
        assert count == len(decode_block(data[offset:offset + length]))
        for doc in decode_block(data[offset:offset + length]):
            seen[doc.key[1]] = (shard, doc.sentences)
    assert {i: s for i, (_, s) in seen.items()} == {i: d.sentences for i, d in docs.items()}
    assert seen[5][0] == ("test", 1) and seen[4][0] == ("training", 0)


def test_merge_sorts_by_key_and_keeps_the_first_copy_of_a_repeated_id():
    rng = random.Random(3)
    chunks = [list(range(0, 20)), list(range(20, 35)) + [7], list(range(35, 50)) + [12, 7]]
    blocks = []
    for number, chunk in enumerate(chunks):
        rng.shuffle(chunk)
        buffer = RunBuffer()
        for i in chunk:
            buffer.add(("training", 0), _doc(i, f"copy {number} of {i}."))
        data, index = _drain(buffer)
        offset, length, _ = index[("training", 0)]
        blocks.append(data[offset:offset + length])
    kept, dropped = merge_blocks(blocks)
    assert [d.key[1] for d in kept] == list(range(50))
    assert all(d.sentences[0].startswith("copy 0 of ") for d in kept[:20])
    assert sorted((d.key[1], d.sentences[0]) for d in dropped) == [
        (7, "copy 1 of 7."), (7, "copy 2 of 7."), (12, "copy 2 of 12.")]


def test_run_names_never_look_like_training_files():
    assert "train" not in run_name(12, 3) and run_name(12, 3) != run_name(12, 4) != run_name(1, 3)
