"""numba's type of a plain numpy array, worked out without loading ``numpy.ma``.

numba types each argument of a kernel call. The first call with a new kind of array (dtype,
dimensions, layout, read-only or not) asks numba's Python rule for arrays, which first tests whether
the array is a masked one: ``np.ma``, a module numpy loads on first use (7-13 ms of a command's
start, for a module nothing here uses). A plain ``np.ndarray`` is never a masked array: its type is
made here from numba's own functions. Any other array (a subclass, masked ones among them) and any
dtype numba cannot type go to numba's rule, so they are typed, or refused, as before.

``install`` registers this rule once a process (``kernel``'s cache does it before the first kernel
loads: diskio.config.lean_cache_class).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


@functools.cache
def install() -> None:
    import numpy as np
    from numba.core.typing.typeof import typeof_impl
    typeof_impl.register(np.ndarray)(plain_array_rule(typeof_impl.dispatch(np.ndarray)))


def plain_array_rule(numba_rule: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The rule for arrays: a plain array typed here, anything else by ``numba_rule``."""
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    def typeof_array(val: Any, c: Any) -> Any:
        if type(val) is not np.ndarray:
            return numba_rule(val, c)
        try:
            dtype = numpy_support.from_dtype(val.dtype)
        except Exception:   # noqa: BLE001 - a dtype numba refuses: its rule says so, in its words
            return numba_rule(val, c)
        return types.Array(dtype, val.ndim, numpy_support.map_layout(val), readonly=not val.flags.writeable)

    return typeof_array
