"""A payload printed a part at a time (``dump --msg`` of a record whose length says gigabytes) is the
text of printing it whole, however it is cut into parts; and the dump holds a part, not the record."""
from __future__ import annotations

import struct
import subprocess
import sys

from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.dump.shell_format import format_payload, payload_parts

# Bytes that meet UTF-8's edges: multi-byte characters, stray continuation bytes, truncated sequences,
# surrogates, overlongs.
EDGES = st.sampled_from([b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\x80", b"\xbf\xbf",
                         b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b"\n"])


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(EDGES | st.binary(max_size=40), max_size=30), cuts=st.lists(st.integers(0, 400), max_size=8),
       fmt=st.sampled_from(["string", "hex"]))
def test_a_payload_in_any_parts_prints_as_the_whole(pieces, cuts, fmt):
    whole = b"".join(pieces)
    at = sorted({min(c, len(whole)) for c in cuts} | {0, len(whole)})
    chunks = [whole[a:b] for a, b in zip(at, at[1:])] or [b""]
    assert "".join(payload_parts(chunks, fmt)) == format_payload(whole, fmt)


def test_a_record_whose_length_says_256_mib_is_printed_in_parts(tmp_path):
    """A journal record's length set to 256 MiB over a file grown sparse: --msg prints its 256 MiB of
    zeros as text, holding a part of it (printing it whole took 21 GB for a 2 GiB length)."""
    journal = tmp_path / "1a200497c65.txn"
    journal.write_bytes((GOLDEN / "interleaved-v6-hostport" / "journal" / "current" / journal.name).read_bytes())
    with open(journal, "r+b") as f:
        f.seek(1024)   # (the third record's length: a data record of 32 bytes)
        assert struct.unpack(">i", f.read(4)) == (32,)
        f.seek(1024)
        f.write(struct.pack(">i", 256 << 20))
        f.truncate(1 << 30)
    # What a second dump of it adds to the resident set at its peak: the first (its output to /dev/null)
    # compiles what it uses when numba's cache is cold (the compiler's memory stays); then the high-water
    # mark is reset to the resident set (/proc/self/clear_refs) and the rise over that is measured.
    code = ("import os, sys\nfrom bkdisk.dump.command import dump\n"
            "def run(p):\n    try:\n        dump.main(['journal', p, '--msg'], standalone_mode=False)\n"
            "    except SystemExit:\n        pass\n    sys.stdout.flush()\n"
            "kept = os.dup(1)\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
            f"run({str(journal)!r})\nos.dup2(kept, 1)\n"
            "def kib(k):\n    return int([x for x in open('/proc/self/status') if x.startswith(k)][0].split()[1])\n"
            "with open('/proc/self/clear_refs', 'w') as f:\n    f.write('5')\n"
            "base = kib('VmHWM:')\n"
            f"run({str(journal)!r})\n"
            "sys.stderr.write(f\"rise {kib('VmHWM:') - base}\\n\")\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=600)
    rise_kib = int(out.stderr.decode().strip().splitlines()[-1].split()[1])
    assert b"EntrySize=268435456" in out.stdout and len(out.stdout) > 256 << 20
    assert rise_kib < 64 << 10, f"{rise_kib >> 10} MiB more at its peak for a 256 MiB payload"
