"""The metadata stage's jitted batch of a folder's closed, empty ledgers: it takes a file only when the
full parser reads it as such a ledger (the same bookies named), and a metadata task gives the same
rows, keys, per-bookie ledgers, counts and errors with it as with every file parsed one by one."""
from __future__ import annotations

import copy
import os
import tempfile

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.metadata_gen import write_folder
from bkdisk.audit.metadata_batch import SLOT, closed_empty_ledgers
from bkdisk.audit.metadata_source import ClosedEmpty, MetadataDirSource, MetadataServiceSource, write_chunks
from bkdisk.audit.metadata_tables import read_chunk_task
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.metadata import DIGEST_TYPES, STATES, parse_metadata, serialize_metadata

C3 = GOLDEN / "cluster-3"


def closed_and_empty(m: LedgerMetadata) -> bool:
    return m.is_closed and all(first > m.last_entry_id for first, _members in m.ensembles)


names = st.sampled_from(["bk-1:3181", "bk-2:3181", "bk-3.rack-b", "", "bookie-\u00e9", "x" * 40])
metadata = st.builds(
    lambda state, last, has_last, ens, digest, password, ctime, custom, ctoken: LedgerMetadata(
        format_version=3, write_quorum=2, ensemble_size=2, ack_quorum=2, length=0,
        last_entry_id=last if has_last else 0, state=state, ensembles=ens, digest_type=digest, password=password,
        ctime=ctime, custom_metadata=custom, ctoken=ctoken, has_last_entry_id=has_last),
    st.sampled_from(STATES), st.integers(-2, 6), st.booleans(),
    st.lists(st.tuples(st.integers(-1, 9), st.lists(names, max_size=3).map(tuple)), max_size=3).map(tuple),
    st.none() | st.sampled_from(DIGEST_TYPES), st.none() | st.binary(max_size=8), st.none() | st.integers(0, 2**40),
    st.lists(st.tuples(st.sampled_from(["k", "\u00e9"]), st.binary(max_size=4)), max_size=2).map(tuple),
    st.none() | st.integers(-5, 5))
# Damage to the bytes: (kind, position, byte); the kernel must leave whatever the parser refuses.
damage = st.none() | st.tuples(st.sampled_from(["flip", "cut", "insert", "append"]), st.integers(0, 400),
                               st.integers(0, 255))


def damaged(data: bytes, how) -> bytes:
    if how is None:
        return data
    kind, at, byte = how
    at %= len(data)
    return {"flip": data[:at] + bytes([data[at] ^ (byte or 1)]) + data[at + 1:], "cut": data[:at],
            "insert": data[:at] + bytes([byte]) + data[at:], "append": data + bytes([byte])}[kind]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(metadata, damage), min_size=1, max_size=6))
def test_the_kernel_takes_a_file_only_when_the_parser_reads_a_closed_empty_ledger(items):
    with tempfile.TemporaryDirectory() as d:
        files, plain_closed_empty = [], set()
        for i, (m, how) in enumerate(items):
            data = damaged(serialize_metadata(m), how)
            files.append(f"{i + 1:x}.bin")
            with open(os.path.join(d, files[-1]), "wb") as f:
                f.write(data)
            ascii_only = all(x.isascii() for _f, ms in m.ensembles for x in ms) and all(
                k.isascii() for k, _v in m.custom_metadata)
            if how is None and ascii_only and closed_and_empty(parse_metadata(data)):
                plain_closed_empty.add(i + 1)
        taken, named, left = closed_empty_ledgers(d, files, threads=2)
        taken_ids = set(taken.tolist())
        parsed = [parse_metadata(open(os.path.join(d, n), "rb").read()) for i, n in enumerate(files)
                  if i + 1 in taken_ids]   # raises FormatError if the kernel took a file the parser refuses
        # Taken: read by the parser as a CLOSED ledger with no ensemble holding entries, its bookies named.
        assert all(closed_and_empty(m) for m in parsed)
        assert named == {x for m in parsed for _f, ms in m.ensembles for x in ms}
        assert plain_closed_empty <= taken_ids   # undamaged and ASCII: always taken
        assert left == [n for i, n in enumerate(files) if i + 1 not in taken_ids]


def one_by_one(source):
    """``source`` with every ledger through its full parser (no batch taken)."""
    class OneByOne(type(source)):
        def read_batches(self, units):
            yield ClosedEmpty(np.empty(0, np.int64), np.empty(0, np.int64), set()), self.read(units)
    plain = copy.copy(source)
    plain.__class__ = OneByOne
    return plain


def run_stage(source, out, per_chunk):
    source.units_per_chunk = per_chunk
    chunks = write_chunks(source, str(out / "chunks"))
    dirs = [str(out / d) for d in ("seg", "near", "known")]
    for d in dirs:
        os.makedirs(d)
    stats = [read_chunk_task(source, i, c, *dirs) for i, c in enumerate(chunks)]
    tables = {}
    for d in dirs:
        for root, _sub, files in os.walk(d):
            rows = [tuple(r.values()) for f in files for r in pq.read_table(os.path.join(root, f)).to_pylist()]
            tables[os.path.relpath(root, out)] = sorted(rows, key=repr)
    return stats, tables


def both_ways(source, tmp_path, per_chunk):
    """The stage's stats and tables with the source's batches and one by one; asserts they agree."""
    got = run_stage(source, tmp_path / "batch", per_chunk)
    want = run_stage(one_by_one(source), tmp_path / "plain", per_chunk)
    for g, w in zip(got[0], want[0], strict=True):
        assert (g["ledgers"], g["errors"], g["first_errors"], g["bookies"]) == \
            (w["ledgers"], w["errors"], w["first_errors"], w["bookies"])
    assert got[1] == want[1]
    return got, want


def test_a_task_gives_the_same_tables_and_errors_with_the_batch_as_file_by_file(tmp_path):
    md = tmp_path / "md"
    write_folder(str(md), 60, 1 << 20, ["bk-x", "bk-y", "bk-z"])
    for f in (C3 / "metadata").iterdir():
        (md / f.name).write_bytes(f.read_bytes())
    empty = (md / f"{1 << 20:x}.bin").read_bytes()
    (md / "77.bin").write_bytes(empty[:-3])                                # cut short: the parser's error
    (md / "78.bin").mkdir()                                                # not a file
    (md / "79.txt").write_bytes(b"not metadata")                           # the .txt form: the parser's error
    (md / ("0" * 15 + "7a.bin")).write_bytes(empty)                        # leading zeros: ledger 0x7a
    big = LedgerMetadata(format_version=3, write_quorum=1, ensemble_size=1, ack_quorum=1, length=0,
                         last_entry_id=-1, state="CLOSED", ensembles=((0, ("bk-big",)),),
                         custom_metadata=(("k", b"v" * SLOT),))
    (md / "7b.bin").write_bytes(serialize_metadata(big))                  # a page or more: the parser's

    got, _want = both_ways(MetadataDirSource(str(md)), tmp_path, 25)
    assert sum(s["errors"] for s in got[0]) == 3 and sum(s["ledgers"] for s in got[0]) == 60 + 6 + 2
    assert len(got[1]["known"]) == 60 + 1 + 1


def test_the_kernel_leaves_a_message_without_a_required_field_to_the_parser(tmp_path):
    from bkdisk.formats.metadata import HEADER_PREFIX, _varint
    from bkdisk.formats.proto import LedgerMetadataFormat
    whole = (tmp_path / "whole")
    write_folder(str(whole), 1, 1, ["bk-1"])
    body = (whole / "1.bin").read_bytes()[len(HEADER_PREFIX) + 3:]
    names = []
    for field in ("quorumSize", "ensembleSize", "length", "state"):
        msg = LedgerMetadataFormat()
        msg.ParseFromString(body)
        msg.ClearField(field)
        data = msg.SerializePartialToString()
        names.append(f"{len(names) + 1:x}.bin")
        (tmp_path / names[-1]).write_bytes(HEADER_PREFIX + b"3\n" + _varint(len(data)) + data)
        with pytest.raises(FormatError, match="required fields"):
            parse_metadata((tmp_path / names[-1]).read_bytes())
    taken, named, left = closed_empty_ledgers(str(tmp_path), names)
    assert len(taken) == 0 and named == set() and left == names
    assert len(closed_empty_ledgers(str(whole), ["1.bin"])[0]) == 1


def test_a_task_reading_the_service_gives_the_same_tables_and_errors_with_the_batch_as_one_by_one(tmp_path):
    from bench.metadata_gen import write_sqlite
    from bkdisk.metaservice.server import serve
    from bkdisk.metaservice.sqlite_store import SqliteStore
    write_sqlite(str(tmp_path / "m.db"), 2500, 1 << 20, ["bk-x", "bk-y", "bk-z"])
    store = SqliteStore(tmp_path / "m.db")
    for f in sorted((C3 / "metadata").glob("*.bin")):
        for scope in (0, 7):
            store.create(scope, int(f.stem, 16), f.read_bytes())
    empty = store.read(0, 1 << 20).data
    store.create(0, 77, empty[:-3])                 # cut short: the parser's error, naming the ledger
    store.create(3, 78, empty)                      # a scope of its own
    server, port = serve(store)
    try:
        got, _want = both_ways(MetadataServiceSource(f"grpc://127.0.0.1:{port}"), tmp_path, 1)
    finally:
        server.stop(0)
        store.close()
    assert sum(s["errors"] for s in got[0]) == 1 and "ledger" in got[0][0]["first_errors"][0]
    assert sum(s["ledgers"] for s in got[0]) == 2500 + 12 + 1
    assert len(got[1]["known"]) == 2500 + 1
