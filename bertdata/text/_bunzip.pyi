"""Signature of the compiled bzip2 decoder (_bunzip.c)."""

def decode(data: bytes, bit: int, level: int, crc: int) -> tuple[bytes, int, int, int, tuple[tuple[int, int], ...]]:
    """The next few blocks of the bz2 streams in `data`, decoded from bit offset `bit`, and
    `(bit, level, crc)` to go on from: `level` the current stream's block size (1-9), 0 between
    streams (where a stream must start at a byte boundary, or the data end); `crc` the
    stream's combined CRC so far. Last, `(byte, offset)` for each stream that ended in this
    call: the byte of `data` after it, and where its output ends in the bytes returned. At the
    end of the data: empty bytes, `bit` its length in bits and `level` 0. Raises ValueError for
    damage anywhere, bytes left after the last stream included; every block's CRC and every
    stream's is checked before its bytes are returned."""

def release() -> None:
    """Unmap the scratch `decode` keeps from one call to the next (about 22 MB): the next call
    maps it again."""
