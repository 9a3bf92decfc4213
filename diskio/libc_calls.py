"""libc's file calls as jitted code calls them, without the GIL and without a Python call per file:
numba links them by name (a ctypes pointer would keep a kernel out of numba's cache). Pointers pass as
int64: numba hands an array's address (``arr.ctypes.data``) to C as an integer. A call that fails
returns -1; the kernels leave what failed to Python's own calls, which say why (errno)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import types

AT_FDCWD = -100   # openat's "relative to the working folder": a path opened as open() opens it

# (Any: jitted code calls them, which the type checker cannot follow)
openat: Any = types.ExternalFunction("openat", types.int32(types.int32, types.int64, types.int32))
read: Any = types.ExternalFunction("read", types.int64(types.int32, types.int64, types.uint64))
close: Any = types.ExternalFunction("close", types.int32(types.int32))


def c_strings(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``names`` as the calls take them: their bytes (the file system's, as ``os.fsencode`` gives), each
    ended by a NUL, back to back; where each starts, and where its NUL is."""
    if not names:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64)
    joined = np.frombuffer(os.fsencode("\0".join(names) + "\0"), np.uint8)
    ends = np.flatnonzero(joined == 0).astype(np.int64)
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    return joined, starts, ends
