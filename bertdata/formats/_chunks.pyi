"""Signature of the hdf5 writer's compiled chunk layout (_chunks.c). Arrays are C-contiguous numpy
arrays (any object with the buffer protocol). Bad input raises TypeError (element type, not
contiguous or read-only) or ValueError (shapes, sizes)."""

from typing import Any

import numpy as np

Array = np.ndarray[Any, np.dtype[Any]]

def shuffle_chunks(out: Array, values: Array, chunk_rows: int, chunk_cols: int) -> None:
    """out[k] = chunk k of values (row-major over the chunk grid), 0-padded at the edges, its bytes
    shuffled as HDF5's shuffle filter stores them."""
