"""libc's file calls as jitted code calls them, without the GIL and without a Python call per file:
numba links them by name (a ctypes pointer would keep a kernel out of numba's cache). Pointers pass as
int64: numba hands an array's address (``arr.ctypes.data``) to C as an integer. A call that fails
returns -1; the kernels leave what failed to Python's own calls, which say why (errno)."""
from __future__ import annotations

from typing import Any

from numba import types

AT_FDCWD = -100   # openat's "relative to the working folder": a path opened as open() opens it

# (Any: jitted code calls them, which the type checker cannot follow)
openat: Any = types.ExternalFunction("openat", types.int32(types.int32, types.int64, types.int32))
read: Any = types.ExternalFunction("read", types.int64(types.int32, types.int64, types.uint64))
close: Any = types.ExternalFunction("close", types.int32(types.int32))
