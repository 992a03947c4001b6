"""Plain-text books (one file each) -> sentences, and the check that a file is text at all."""

from __future__ import annotations

from collections import Counter

from bertdata.text.articles import BOOKS_SOURCE, Document
from bertdata.errors import BertdataError
from bertdata.fsutil import binary_kind
from bertdata.text.plaintext import sentences as plain_sentences

SNIFF_BYTES = 1 << 16


def check_text_file(path: str, head: bytes) -> None:
    """Refuse a file whose first bytes are not UTF-8 text: a binary book would train on garbage."""
    kind = binary_kind(head)
    if kind is not None:
        raise BertdataError(f"{path}: {kind}, not a book; books must be plain UTF-8 text")
    if b"\x00" in head:
        raise BertdataError(f"{path}: binary file (NUL bytes) in the books folder; books must be plain text")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        # A multi-byte character cut by the sniff window is fine; anything earlier is not.
        if err.start < len(head) - 4:
            raise BertdataError(
                f"{path}: not UTF-8 text (byte {err.start}); books must be plain UTF-8 text") from None


def book_document(path: str, data: bytes, splitter, counts: Counter) -> Document | None:
    """A book's paragraphs (blank-line separated; hard-wrapped lines joined) split into sentences."""
    counts["books"] += 1
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    sentences = plain_sentences(text, splitter)
    if not sentences:
        counts["skipped_empty_book"] += 1
        return None
    counts["book_sentences"] += len(sentences)
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return Document.of((BOOKS_SOURCE, name), sentences)
