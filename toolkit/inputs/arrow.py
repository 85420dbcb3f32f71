"""NumPy arrays to Arrow without ``pa.array``.

``pa.array`` on an ndarray asks whether it is a masked array, and under NumPy 2 the first
``np.ma`` imports ``numpy.ma`` (with ``inspect`` parsing the signatures of its wrappers): 0.01
CPU s of every import, which only ever hands it plain arrays. ``Array.from_buffers`` wraps
the same memory (no copy) and imports nothing (tests/test_fast_start.py checks an import never
loads ``numpy.ma``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def from_numpy(values: np.ndarray) -> pa.Array:
    """A 1-D numeric or boolean ndarray as an Arrow array without nulls (what ``pa.array`` gives
    for it). Booleans are packed into Arrow's bitmap; numbers share the ndarray's memory."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])
