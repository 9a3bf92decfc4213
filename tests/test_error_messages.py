"""Parser errors speak the project's words: file, offset, what was expected, what was found, and never a
Python repr (b'...'), a construct parse path or an exception name."""
from __future__ import annotations

import random
import re
import zlib

import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bkdisk.dump.command import dump
from bkdisk.formats.errors import FormatError, shown

PY_REPR = re.compile(r"""(?<!["'\w])b['"]|\\x[0-9a-f]{2}|Error in path|Traceback|ConstError|StreamError""")
KINDS = [("journal", "interleaved-v6-hostport/journal/current/1a200497c65.txn"),
         ("entrylog", "interleaved-v6-hostport/ledgers1/current/0.log"),
         ("index", "interleaved-v6-hostport/ledgers1/current/0/0/0.idx"),
         ("cookie", "interleaved-v6-hostport/journal/current/VERSION"),
         ("metadata", "interleaved-v6-hostport/metadata/0.bin"),
         ("metadata", "interleaved-v6-hostport/metadata/0.txt"),
         ("metadata", "interleaved-v6-hostport/metadata/0.v1.txt"),
         ("lastmark", "interleaved-v6-hostport/ledgers1/current/lastMark")]


def _mutants(data: bytes, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = [data[:n] for n in (0, 1, 3, 7, 9, 31, 33, 1023, 1025) if n < len(data)]
    for _ in range(12):
        b = bytearray(data[:4096])
        for _ in range(rnd.randint(1, 6)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        out.append(bytes(b))
    out.append(bytes(rnd.randrange(256) for _ in range(64)))
    return out


@pytest.mark.parametrize("kind, rel", KINDS, ids=[f"{k}:{r.rsplit('/', 1)[-1]}" for k, r in KINDS])
def test_damaged_files_give_one_line_errors_without_python_reprs(kind, rel, tmp_path):
    data = (GOLDEN / rel).read_bytes()
    seen_errors = 0
    for i, m in enumerate(_mutants(data, zlib.crc32(rel.encode()))):   # the same mutants in every run
        target = tmp_path / str(i) / rel.rsplit("/", 1)[-1]   # the file keeps its name (an index names its ledger)
        target.parent.mkdir()
        target.write_bytes(m)
        r = CliRunner().invoke(dump, [kind, str(target)])
        assert r.exit_code in (0, 8), r.output
        err = r.stderr.strip()
        if r.exit_code == 8:
            seen_errors += 1
            assert len(err.splitlines()) == 1 and err.startswith("bkdisk: "), err
            assert str(target) in err and "expected" in err, err
            assert not PY_REPR.search(err), err
    assert seen_errors > 0


def test_shown_renders_bytes_as_hex_and_text_in_quotes():
    assert shown(b"\x2b\xe5\x01\x02") == "2b e5 01 02"
    assert shown(b"BKLE") == "'BKLE'"
    assert shown(bytes(range(40))).endswith(" …") and len(shown(bytes(range(40))).split()) == 17
    assert shown("caf\u00e9 'x'") == "'caf\u00e9 'x''"          # printable text as it is
    assert shown("2010\x1b") == "32 30 31 30 1b"              # a control character: the bytes in hex
    assert not PY_REPR.search(str(FormatError("x", shown(b"\xff\x00"), path="/f", offset=3)))


def test_a_control_character_in_text_metadata_is_named_in_hex_not_as_a_python_escape(tmp_path):
    # Found by the mutants above: protobuf's parser quotes the bad token as '\x05'.
    data = (GOLDEN / "interleaved-v6-hostport/metadata/0.txt").read_bytes()
    target = tmp_path / "0.txt"
    target.write_bytes(data.replace(b'ensembleMember: "', b"ensembleMember: \x05", 1))
    r = CliRunner().invoke(dump, ["metadata", str(target)])
    err = r.stderr.strip()
    assert r.exit_code == 8 and len(err.splitlines()) == 1 and str(target) in err, err
    assert "0x05" in err and not PY_REPR.search(err) and "\x05" not in err, err
