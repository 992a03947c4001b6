"""Signature of the hdf5 writer's compiled deflate (_zrle.c). `data` is any C-contiguous object with
the buffer protocol (a numpy array, bytes) of under 2**31 bytes; anything else raises TypeError or
ValueError."""

from typing import Any

import numpy as np

def zlib_rle(data: bytes | bytearray | memoryview | np.ndarray[Any, np.dtype[Any]]) -> bytes:
    """The zlib stream of data's bytes: runs as distance-1 matches and one optimal Huffman block
    (stored blocks where those are smaller). The same bytes on every machine; the GIL is released."""
