"""Reading a text shard (one sentence per line, a blank line ends a document) into token ids."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bertdata.errors import BertdataError
from bertdata.fsutil import binary_kind, input_errors
from bertdata.instances._wordpiece import text_lines
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.tokenizer_file import TokenizerFile

# Bytes decoded and tokenized at a time: bounds the memory spent on text, whatever the shard size.
BLOCK_BYTES = 1 << 18
ERRORS = ("strict", "replace")
class EmptyShard(BertdataError):
    """No sentence with any token: nothing to make instances from."""


@dataclass(frozen=True)
class Documents:
    """A tokenized shard: sentence `s` is `tokens[sentence_offsets[s]:sentence_offsets[s + 1]]`,
    document `d` is sentences `doc_offsets[d]:doc_offsets[d + 1]`; documents in input order,
    every sentence and document non-empty."""

    paths: tuple[str, ...]
    tokens: np.ndarray
    sentence_offsets: np.ndarray
    doc_offsets: np.ndarray
    # Each document's number in the text (how many documents came before it there, those without
    # tokens included), and, where the text shard has an ids file, its name: "<corpus>/<id>".
    doc_numbers: np.ndarray | None = None
    names: tuple[str, ...] | None = None

    def named(self, shard_names: list[str]) -> "Documents":
        """These documents with their names, from the names of all the shard's documents in order."""
        from dataclasses import replace

        if self.doc_numbers is None or (len(self.doc_numbers) and self.doc_numbers[-1] >= len(shard_names)):
            raise BertdataError(f"{_names(self.paths)}: its ids file names {len(shard_names)} documents, "
                                "fewer than the shard holds")
        return replace(self, names=tuple(shard_names[k] for k in self.doc_numbers.tolist()))

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1

    @property
    def num_sentences(self) -> int:
        return len(self.sentence_offsets) - 1

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


def read_documents(inputs: str | os.PathLike | Sequence[str | os.PathLike],
                   tokenizer: WordPiece | TokenizerFile,
                   errors: str = "strict", progress: Callable[[int], object] | None = None) -> Documents:
    """Tokenize one shard made of one or more text files, read in order.

    As in the reference, lines are split on any of \\n, \\r\\n, \\r and stripped; a blank
    line ends a document; a line with no tokens is dropped, as is a document with no
    sentences; a document running off the end of one file continues in the next.
    `errors="replace"` turns undecodable bytes into U+FFFD (which tokenization deletes)
    instead of failing. `progress(n)` is called with each block's byte count.
    """
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {ERRORS}, not {errors!r}")
    paths = (os.fspath(inputs),) if isinstance(inputs, (str, os.PathLike)) else tuple(map(os.fspath, inputs))
    if not paths:
        raise BertdataError("no input text files given")
    id_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    doc_parts: list[np.ndarray] = []
    # Documents are numbered by how many blank lines came before, across files, as the
    # reference keeps appending to its last document when a new file starts.
    blank_lines = 0

    def encode(joined: bytes, starts: np.ndarray, docs: np.ndarray) -> None:
        ids, lengths = tokenizer.encode_joined(joined, starts, dtype=tokenizer.id_dtype, documents=docs)
        id_parts.append(ids)
        length_parts.append(lengths)
        doc_parts.append(docs)

    # The last document's lines (UTF-8 joined by newlines, where each starts, its number): a
    # document is tokenized whole, and it may go on in the next block or file.
    held = (b"", np.empty(0, np.int64), np.empty(0, np.int64))
    for path in paths:
        for joined, starts, blank in _blocks(path, errors, progress):
            blank = np.frombuffer(blank, dtype=bool)
            doc_of_line = np.cumsum(blank) + blank_lines
            blank_lines = int(doc_of_line[-1])
            starts, docs = np.frombuffer(starts, dtype=np.int64), doc_of_line[~blank]
            if len(held[1]) and len(starts):
                joined, starts = held[0] + b"\n" + joined, np.concatenate((held[1], starts + len(held[0]) + 1))
                docs = np.concatenate((held[2], docs))
            elif len(held[1]):
                joined, starts, docs = held
            # Lines of a document that a blank line has not ended yet wait for the rest of it.
            keep = int(np.searchsorted(docs, blank_lines)) if len(docs) else 0
            cut = int(starts[keep]) if keep < len(starts) else len(joined) + 1
            if keep:
                encode(joined[:cut - 1], starts[:keep], docs[:keep])
            held = (joined[cut:], starts[keep:] - cut, docs[keep:])
    if len(held[1]):
        encode(*held)
    lengths = np.concatenate(length_parts) if length_parts else np.empty(0, np.int32)
    doc_of_sentence = np.concatenate(doc_parts) if doc_parts else np.empty(0, np.int64)
    kept = lengths > 0
    lengths, doc_of_sentence = lengths[kept], doc_of_sentence[kept]
    if not len(lengths):
        raise EmptyShard(f"{_names(paths)}: empty shard (no sentence with any token); "
                            "a text shard has one sentence per line, a blank line between documents")
    sentence_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=sentence_offsets[1:])
    starts = np.flatnonzero(np.diff(doc_of_sentence)) + 1
    doc_offsets = np.concatenate(([0], starts, [len(lengths)])).astype(np.int64)
    return Documents(paths, np.concatenate(id_parts), sentence_offsets, doc_offsets, doc_of_sentence[doc_offsets[:-1]])


def _names(paths: tuple[str, ...]) -> str:
    return paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} more files)"


def _blocks(path: str, errors: str, progress: Callable[[int], object] | None):
    """The file's text in blocks of whole lines, universal newlines turned into \\n, each as
    `text_lines` gives it: the lines stripped as `str.strip` strips them, the non-blank ones in
    UTF-8 joined by newlines, where each starts, and which lines are blank."""
    with input_errors(path, "text shard"):
        f = open(path, "rb")  # noqa: SIM115 -- closed in the finally below
    try:
        offset = 0  # byte offset of the block in the file
        line = 1  # line number of the block's first line
        # The start of a line not ended yet, in pieces: joined once, so a line of any
        # length costs linear time.
        carry: list[bytes] = []
        while True:
            with input_errors(path, "text shard"):
                chunk = f.read(BLOCK_BYTES)
            if offset == 0 and not carry and (kind := binary_kind(chunk)):
                raise BertdataError(f"{path}: {kind}, not a text shard (UTF-8 text, one sentence per line)")
            if chunk and b"\n" not in chunk:  # one line longer than a block: keep reading
                carry.append(chunk)
                continue
            data = b"".join([*carry, chunk])
            if not data:
                return
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            block, rest = data[:cut], data[cut:]
            carry = [rest] if rest else []
            # \r and \n are never part of a longer UTF-8 sequence: bytes and text alike.
            text = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in block else block
            lines = text_lines(text[:-1] if text.endswith(b"\n") else text)
            if lines is None:  # not UTF-8: an error, or U+FFFD for each undecodable byte
                try:
                    text = block.decode("utf-8", errors)
                except UnicodeDecodeError as err:
                    where = line + block.count(b"\n", 0, err.start)
                    raise BertdataError(
                        f"{path}: not UTF-8 at line {where} (byte offset {offset + err.start}: "
                        f"{err.object[err.start:err.end]!r}); pass --errors replace to replace "
                        "undecodable bytes with U+FFFD") from None
                text = text.replace("\r\n", "\n").replace("\r", "\n")
                lines = text_lines(text.removesuffix("\n").encode("utf-8"))
            if progress is not None:
                progress(len(block))
            offset += len(block)
            line += block.count(b"\n")
            yield lines
    finally:
        f.close()
