"""The bookie writer lays a disk out as a real bookie does, and reading it back gives its description."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.reader import read_bookie
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats import entrylog as fe
from bkdisk.formats.digests import DigestType, master_key
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import parse_header as parse_index_header


def _shape(root: Path) -> set[str]:
    """Relative paths with hex ids abstracted: what kinds of files sit where."""
    out = set()
    for p in root.rglob("*"):
        if p.is_file():
            rel = str(p.relative_to(root))
            rel = re.sub(r"[0-9a-f]+\.(txn|log|idx)$", r"<hex>.\1", rel)
            rel = re.sub(r"current/[0-9a-f]{1,2}/[0-9a-f]{1,2}/", "current/<xx>/<yy>/", rel)
            out.add(rel)
    return out


def _golden_like_spec() -> BookieSpec:
    m = json.loads((GOLDEN / "interleaved-v6-hostport" / "manifest.json").read_text())
    ledgers = []
    for l in m["ledgers"]:
        n = l["num_entries"]
        ledgers.append(LedgerSpec(int(l["ledger_id"]), [bytes([i % 251]) * (i * 37 % 5000) for i in range(n)],
                                  DigestType.parse(l["digest_type"]), bytes.fromhex(l["password_hex"]),
                                  fenced=l["fenced"], explicit_lac=l["explicit_lac"]))
    return BookieSpec(ledgers, bookie_id=m["bookie_id"], journal_dirs=["journal"], ledger_dirs=["ledgers0", "ledgers1"],
                      journal_version=6, index_version=1, page_size=8192, entry_log_size_limit=64 * 1024)


def test_writer_v1_output_has_the_golden_layout_names_and_headers(tmp_path):
    assert GOLDEN.is_dir()
    golden = GOLDEN / "interleaved-v6-hostport"
    spec = _golden_like_spec()
    w = write_bookie(spec, str(tmp_path))
    ours = _shape(tmp_path)
    theirs = {p for p in _shape(golden) if p.startswith(("journal/", "ledgers"))}
    assert ours == theirs
    gj = sorted((golden / "journal" / "current").glob("*.txn"))[0].read_bytes()
    oj = Path(w.journal_files[0]).read_bytes()
    assert oj[:512] == gj[:512]                       # 'BKLG', version 6, zero-padded sector
    assert len(oj) % (1 << 20) == 0                   # preallocated in 1 MiB steps like the golden journals
    logs = [Path(p) for p in w.entry_log_files]
    for p in logs[:-1]:
        h = fe.parse_header(p.read_bytes())
        assert h.version == 1 and h.ledgers_map_offset > 0 and h.ledgers_count > 0   # rolled: has a map
    last = fe.parse_header(logs[-1].read_bytes())
    assert (last.ledgers_map_offset, last.ledgers_count) == (0, 0)                  # current at shutdown
    for lid, p in w.index_files.items():
        golden_idx = next(golden.glob(f"ledgers*/current/*/*/{lid.ledger:x}.idx"))
        assert parse_index_header(Path(p).read_bytes()) == parse_index_header(golden_idx.read_bytes())
        assert Path(p).read_bytes()[:1024] == golden_idx.read_bytes()[:1024]


def _check_read_back(spec: BookieSpec, root: str) -> None:
    dirs = discover(root)
    types = {l.lid: l.digest_type for l in spec.ledgers}
    pws = {l.lid: l.password for l in spec.ledgers}
    content = read_bookie(dirs, types, pws)
    want = {}
    for l in spec.ledgers:
        total = 0
        for i, p in enumerate(l.payloads):
            total += len(p)
            want[(l.lid, l.first_entry + i)] = (p, total, l.first_entry + i - 1)
    assert set(content.entries) == set(want)
    for k, (payload, length, lac) in want.items():
        [copy] = content.entries[k]
        e = copy.entry
        assert (e.payload, e.length, e.last_add_confirmed) == (payload, length, lac)
        assert e.format_version == (2 if k[0].scope else 1)
        assert copy.digest_ok is True
    for l in spec.ledgers:
        st_ = content.ledgers[l.lid]
        assert st_.master_key == master_key(l.password)
        assert st_.fenced == l.fenced
        expect_lac = l.explicit_lac if (spec.journal_version >= 6 or spec.index_version >= 1) else None
        assert st_.explicit_lac == expect_lac


ledger_st = st.builds(
    LedgerSpec,
    ledger_id=st.integers(0, (1 << 63) - 1),
    payloads=st.lists(st.binary(max_size=3000), min_size=1, max_size=8),
    digest_type=st.sampled_from(list(DigestType)),
    password=st.binary(max_size=12),
    scope_id=st.one_of(st.just(0), st.integers(1, (1 << 64) - 1)),
    fenced=st.booleans(),
    explicit_lac=st.one_of(st.none(), st.integers(0, 5)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ledgers=st.lists(ledger_st, min_size=1, max_size=6, unique_by=lambda l: (l.scope_id, l.ledger_id)),
       jv=st.sampled_from([4, 5, 6]), dirs=st.integers(1, 3), limit=st.sampled_from([4096, 20000, 1 << 20]))
def test_writer_output_reads_back_as_its_description(tmp_path_factory, ledgers, jv, dirs, limit):
    root = str(tmp_path_factory.mktemp("b"))
    spec = BookieSpec(ledgers, journal_version=jv, index_version=1 if jv >= 6 else 0,
                      ledger_dirs=[f"ledgers{i}" for i in range(dirs)], entry_log_size_limit=limit,
                      page_size=1024)
    w = write_bookie(spec, root)
    _check_read_back(spec, root)
    assert sum(len(b) for b in w.entries.values()) == w.bytes_written


def test_scoped_ledgers_go_to_the_4_level_hierarchy(tmp_path):
    spec = BookieSpec([LedgerSpec(0x42, [b"x" * 10], scope_id=0xABCDEF0123)])
    w = write_bookie(spec, str(tmp_path))
    p = w.index_files[LedgerId(0xABCDEF0123, 0x42)]
    rel = os.path.relpath(p, str(tmp_path / "ledgers" / "current"))
    assert rel == f"1/23/0/42/{LedgerId(0xABCDEF0123, 0x42).qualified_name}.idx"
