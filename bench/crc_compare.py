"""The CRC comparisons of bench/scan_bench.py: the jitted CRC variants against the libraries.

``crc_options``: each CRC implementation over the stored entries of one page-cached window.
``library_digest_scan``: the whole entry-log scan with the digests checked by the libraries
(crc32c.crc32c, zlib.crc32) called once per entry from Python, as the jitted check's alternative.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np

from bench.scan_bench import _best


def _per_entry(crc, mv: memoryview, pairs: list[tuple[int, int]]) -> list[int]:
    """One library call per stored entry, as a Python caller without the jitted kernels makes them."""
    return [crc(mv[a:b]) for a, b in pairs]


def crc_options(logs: list[str], window: int) -> list[tuple[str, float]]:
    """GB/s of each CRC implementation over the stored entries of the first window of the first log."""
    import crc32c

    from bkdisk.digests import crc_kernels as K
    from bkdisk.diskio import config
    from bkdisk.diskio.kernels import readonly
    from bkdisk.diskio.mapped import map_window
    from bkdisk.entrylogs.scan import scan_entry_log
    from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

    s = scan_entry_log(logs[0], window=window)
    prefix = SIZE_PREFIX_SIZE
    e = s.entries[s.entries["offset"] + prefix + s.entries["size"] <= window]
    offs = (e["offset"] + prefix).astype(np.int64)
    lens = e["size"].astype(np.int64)
    nbytes = int(lens.sum())
    out = []
    with map_window(logs[0], 0, window) as w:
        buf = readonly(w)
        res = np.zeros(len(offs), np.uint32)
        for v in config.supported_crc_variants():
            for poly, pname in ((K.POLY_CRC32C, "CRC32C"), (K.POLY_CRC32, "CRC32")):
                K.crc_many(buf, offs[:1], lens[:1], poly, v, res)
                t, _ = _best(functools.partial(K.crc_many, buf, offs, lens, poly, v, res), 3)
                out.append((f"jitted {config.CRC_VARIANT_NAMES[v]:8s} {pname}", nbytes / t / 1e9))
        mv = memoryview(buf)
        pairs = list(zip(offs.tolist(), (offs + lens).tolist()))
        t, _ = _best(functools.partial(_per_entry, crc32c.crc32c, mv, pairs), 3)
        out.append(("crc32c package, one call per entry   CRC32C", nbytes / t / 1e9))
        t, _ = _best(functools.partial(_per_entry, zlib.crc32, mv, pairs), 3)
        out.append(("zlib.crc32, one call per entry       CRC32", nbytes / t / 1e9))
        del mv, buf, w
    return out


def library_digest_scan(logs: list[str], window: int, dtype) -> tuple[int, int]:
    """The whole scan with digests checked by the libraries instead of the jitted CRC: the jitted
    framing walk, then one ``formats.digests.compute_digest`` call per entry (crc32c.crc32c for
    CRC32C, zlib.crc32 for CRC32: header, then payload) in a Python loop over the entry slices of
    each mapped window, compared with the stored digest. Returns (ok, bad)."""
    from bkdisk.diskio.kernels import readonly
    from bkdisk.diskio.mapped import map_window
    from bkdisk.entrylogs.scan import scan_entry_log
    from bkdisk.formats.digests import DIGEST_LENGTH, compute_digest
    from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
    from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

    ok = bad = 0
    d = DIGEST_LENGTH[dtype]
    for p in logs:
        e = scan_entry_log(p, window=window).entries
        starts = e["offset"].astype(np.int64)
        ends = starts + SIZE_PREFIX_SIZE + e["size"].astype(np.int64)
        i = 0
        while i < len(e):   # windows of whole entries, mapped like the jitted scan maps them
            w0 = int(starts[i])
            j = max(i + 1, int(np.searchsorted(ends, w0 + window, side="right")))
            with map_window(p, w0, int(ends[j - 1]) - w0) as m:
                mv = memoryview(readonly(m))
                for off, size, fmt in zip(starts[i:j].tolist(), e["size"][i:j].tolist(), e["format"][i:j].tolist()):
                    b = off - w0 + SIZE_PREFIX_SIZE
                    h = ENTRY_V2_HEADER_SIZE if fmt == 2 else ENTRY_V1_HEADER_SIZE
                    if compute_digest(dtype, mv[b:b + h], mv[b + h + d:b + size]) == mv[b + h:b + h + d]:
                        ok += 1
                    else:
                        bad += 1
                del mv, m
            i = j
    return ok, bad
