"""The jitted CRC kernels against zlib's CRC32 and the crc32c package, every variant the CPU runs."""
from __future__ import annotations

import os
import subprocess
import sys
import zlib

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.digests import crc_kernels as C
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio import config
from bkdisk.diskio.kernels import as_bytes_array

VARIANTS = config.supported_crc_variants()
REFERENCE = {C.POLY_CRC32: zlib.crc32, C.POLY_CRC32C: crc32c.crc32c}
# Every length up to past the first fold (the three streams' shift constant is per length in words),
# then either side of the 64-byte folds and of the 16-byte folds after them.
EDGES = list(range(C.FOLD_FROM + 80)) + [n + d for n in (2048, 4096) for d in range(-17, 18)]


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())


def test_the_crc32_instruction_variant_is_the_best_exactly_where_the_cpu_has_it():
    # Where the CPU has SSE4.2's crc32 and PCLMULQDQ (this project's machines do), the digest checks
    # run the sse42 variant; elsewhere it is not offered. (The benchmarks' figures are that variant's.)
    has = {"sse4_2", "pclmulqdq"} <= _cpu_flags() and "NUMBA_CPU_FEATURES" not in os.environ
    assert (config.CRC_SSE42 in VARIANTS) == has
    if has:
        assert config.best_crc_variant() == config.CRC_SSE42


@pytest.mark.parametrize("poly", [C.POLY_CRC32, C.POLY_CRC32C])
def test_every_variant_at_every_length_where_it_changes_course(poly: int):
    data = os.urandom(max(EDGES) + 16)
    for skip in (0, 3):
        buf = as_bytes_array(bytes(skip) + data)
        for n in EDGES:
            want = REFERENCE[poly](data[:n])
            got = {v: C.crc32_of(buf, skip, n, poly, v) for v in VARIANTS}
            assert set(got.values()) == {want}, (n, skip, got)


@settings(max_examples=120, deadline=None)
@given(data=st.binary(min_size=0, max_size=5000), skip=st.integers(0, 7), cut=st.integers(0, 5000),
       poly=st.sampled_from([C.POLY_CRC32, C.POLY_CRC32C]))
def test_a_run_continued_in_two_calls_equals_the_reference(data: bytes, skip: int, cut: int, poly: int):
    """crc_update continues any register (an entry's digest is its header then its body, in two calls)."""
    buf = as_bytes_array(bytes(skip) + data + bytes(5))
    cut = min(cut, len(data))
    m = 0xFFFFFFFF
    for v in VARIANTS:
        reg = C.crc_update(m, buf, skip, cut, poly, v)
        reg = C.crc_update(reg, buf, skip + cut, len(data) - cut, poly, v)
        assert int(reg) ^ m == REFERENCE[poly](data), (v, len(data), cut)


def test_crc_variant_defaults_to_the_fastest_the_cpu_supports():
    assert config.crc_variant() in VARIANTS
    if os.environ.get("BKDISK_CRC") is None:
        assert config.crc_variant() == config.best_crc_variant()
    assert DigestPlan().crc_variant == config.crc_variant()


@pytest.mark.parametrize("name", sorted(config.CRC_VARIANT_NAMES.values()))
def test_bkdisk_crc_names_a_variant_or_the_best_supported_below_it(name: str):
    code = {v: k for k, v in config.CRC_VARIANT_NAMES.items()}[name]
    script = "from bkdisk.diskio import config; print(config.crc_variant())"
    r = subprocess.run([sys.executable, "-c", script], env={**os.environ, "BKDISK_CRC": name}, capture_output=True,
                       text=True, timeout=300, cwd="/")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == max(v for v in VARIANTS if v <= code)
