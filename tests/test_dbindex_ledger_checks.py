"""DbLedgerStorage's ledgers index against what the journal says of each ledger (pass 3 on such a
bookie): a master key, a fence or an explicit LAC the index does not hold is reported for that ledger
only; the index's rows looked up for many ledgers at once."""
from __future__ import annotations

import os
import shutil

import numpy as np

from bkdisk.bookie.db_index_writer import write_db_indexes
from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import lac_body, write_bookie
from bkdisk.formats.paths import LEDGERS_DB, LOCATIONS_DB
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.passes.p3_index import check_ledgers
from bkdisk.rocksdbfiles.dbindex import LedgerDirIndex, LedgerTable, ledger_infos, read_ledger_dir

HIGH = (1 << 62) + 5


def _ledgers(**changed) -> list[LedgerSpec]:
    out = []
    for lid in (3, 7, 11, 12, HIGH, HIGH + 1):
        kw = dict(password=b"pw%d" % lid, fenced=lid in (11, HIGH + 1), explicit_lac=0 if lid in (12, HIGH) else None)
        kw.update(changed.get(str(lid), {}))
        out.append(LedgerSpec(lid, [b"x" * 10, b"y" * 20], **kw))
    return out


def test_the_ledgers_index_against_the_journal(tmp_path):
    root = str(tmp_path / "bk")
    spec = BookieSpec(_ledgers(), storage="rocksdb")
    wb = write_bookie(spec, root)
    current = os.path.join(root, "ledgers", "current")
    ctx = CheckContext(discover(root))
    assert check_ledgers(ctx) == []
    # The index rewritten as if it had lost what the journal says: another password for 7 and HIGH + 1,
    # no fence for 11, another explicit LAC for 12 and HIGH; ledger 3 gone from it.
    differ = {"7": dict(password=b"other"), str(HIGH + 1): dict(password=b"other", fenced=True),
              "11": dict(fenced=False), "12": dict(explicit_lac=1), str(HIGH): dict(explicit_lac=1)}
    kept = [l for l in _ledgers(**differ) if l.ledger_id != 3]
    for name in (LOCATIONS_DB, LEDGERS_DB):
        shutil.rmtree(os.path.join(current, name))
    write_db_indexes(current, kept, wb.locations, lac_body)
    got = [(code.name, f["ledger"]) for code, f in check_ledgers(CheckContext(discover(root)))]
    assert sorted(got) == sorted([("DBINDEX_LEDGER_UNKNOWN", 3), ("DBINDEX_MASTER_KEY_MISMATCH", 7),
                                  ("DBINDEX_NOT_FENCED", 11), ("DBINDEX_EXPLICIT_LAC_MISMATCH", 12),
                                  ("DBINDEX_EXPLICIT_LAC_MISMATCH", HIGH), ("DBINDEX_MASTER_KEY_MISMATCH", HIGH + 1),
                                  ("DBINDEX_LEDGER_MISSING", 3)])


def test_ledger_rows_are_looked_up_at_once(tmp_path):
    root = str(tmp_path / "bk")
    write_bookie(BookieSpec(_ledgers(), storage="rocksdb"), root)
    idx = read_ledger_dir(os.path.join(root, "ledgers", "current"))
    table = idx.ledgers
    assert isinstance(table, LedgerTable)
    want = np.array([7, 3, 4, HIGH, HIGH + 1, -5, 1 << 62, 12, HIGH + 2], np.int64)
    rows = table.rows(want)
    assert rows.tolist() == [table._row(int(x)) for x in want] and (rows == -1).sum() == 4
    infos = ledger_infos(idx, want)
    assert [i.ledger_id if i else None for i in infos] == [7, 3, None, HIGH, HIGH + 1, None, None, 12, None]
    assert [i.fenced for i in infos if i] == [False, False, False, True, False]
    as_dict = LedgerDirIndex(idx.current, ledgers={lid: info for lid, info in table.items()})
    assert ledger_infos(as_dict, want) == infos


def test_master_keys_compared_without_parsing_agree_with_the_parsed_values(tmp_path, monkeypatch):
    from bkdisk.rocksdbfiles import dbindex
    from bkdisk.rocksdbfiles.dbindex import same_master_keys
    root = str(tmp_path / "bk")
    write_bookie(BookieSpec(_ledgers(), storage="rocksdb"), root)
    idx = read_ledger_dir(os.path.join(root, "ledgers", "current"))
    table = idx.ledgers
    assert isinstance(table, LedgerTable) and (table.key_at != dbindex.NO_KEY).all()   # (every value plain)
    want = np.array([7, 3, 4, HIGH, HIGH + 1, 12, 11], np.int64)
    infos = ledger_infos(idx, want)
    right = [i.master_key if i else b"" for i in infos]
    keys = [right[0], b"", right[3][:-1] + b"?", right[4][:-1], right[5], right[6] + b"!", right[3], right[4]]
    key_of = np.array([0, 1, -1, 2, 3, 4, 5], np.int64)   # (4 is not in the index; 3 has no key)
    same = same_master_keys(idx, want, key_of, keys)
    assert same.tolist() == [True, False, False, False, False, True, False]
    assert same_master_keys(idx, want, np.array([0, 1, 1, 6, 7, 4, 1]), keys).tolist() == \
        [True, False, False, True, True, True, False]
    # A value the protobuf library read (no key offset): never said the same, so its LedgerInfo is parsed.
    every = np.arange(len(want))
    lost = LedgerDirIndex(idx.current, ledgers=LedgerTable(table.ids, table.arena, table.ends))
    assert not same_master_keys(lost, want, every, right).any()
    as_dict = LedgerDirIndex(idx.current, ledgers={lid: info for lid, info in table.items()})
    assert not same_master_keys(as_dict, want, every, right).any()
    assert same_master_keys(idx, want, every, right).tolist() == [i is not None for i in infos]
    monkeypatch.setattr(dbindex, "KEYS_AT_ONCE", 2)   # (compared a block of keys at a time)
    assert same_master_keys(idx, want, key_of, keys).tolist() == same.tolist()


def test_a_key_only_the_protobuf_library_reads_is_compared_as_it_reads_it(tmp_path):
    """A value the jitted walk leaves to the library (an unknown field between two masterKeys): the key
    protobuf keeps is the last, which the walk never reached; the check parses that value."""
    from bkdisk.formats import dbledger as fd
    from bkdisk.formats.digests import master_key
    from bkdisk.formats.rocksdb import ValueType
    from bkdisk.rocksdbfiles.sst import Record
    from bkdisk.rocksdbfiles.writer import write_db
    root = str(tmp_path / "bk")
    write_bookie(BookieSpec(_ledgers(), storage="rocksdb"), root)
    current = os.path.join(root, "ledgers", "current")
    shutil.rmtree(os.path.join(current, LEDGERS_DB))
    records = []
    for seq, spec in enumerate(_ledgers(), 1):
        value = fd.ledger_value(fd.LedgerInfo(spec.ledger_id, True, spec.fenced, master_key(spec.password), None, None))
        if spec.ledger_id == 7:
            value += bytes.fromhex("3000") + b"\x1a\x14" + b"\x01" * 20   # unknown field 6, then another key
        records.append(Record(fd.LEDGERS_KEY.build(spec.ledger_id), seq, int(ValueType.VALUE), value))
    write_db(os.path.join(current, LEDGERS_DB), [(0, records)])
    got = [(code.name, f["ledger"], f.get("detail")) for code, f in check_ledgers(CheckContext(discover(root)))]
    assert got == [("DBINDEX_MASTER_KEY_MISMATCH", 7, f"journal {master_key(b'pw7').hex()}, index {'01' * 20}; "
                    "without the ledger's password in metadata, which one is damaged is unknown")]


def test_an_empty_or_all_zero_key_in_the_ledgers_index_is_unset_not_a_mismatch(tmp_path):
    """BookKeeper's own ledgers-index rebuild writes an empty key, and LedgerMetadataIndex.setMasterKey
    replaces an empty or all-zero stored key with the next one given: no mismatch, no rebuild advice."""
    from bkdisk.formats import dbledger as fd
    from bkdisk.formats.digests import master_key
    from bkdisk.formats.rocksdb import ValueType
    from bkdisk.rocksdbfiles.sst import Record
    from bkdisk.rocksdbfiles.writer import write_db
    root = str(tmp_path / "bk")
    write_bookie(BookieSpec(_ledgers(), storage="rocksdb"), root)
    current = os.path.join(root, "ledgers", "current")
    shutil.rmtree(os.path.join(current, LEDGERS_DB))
    stored = {3: b"", 7: bytes(20), 11: b"\x01" + bytes(19)}
    records = []
    for seq, spec in enumerate(_ledgers(), 1):
        key = stored.get(spec.ledger_id, master_key(spec.password))
        value = fd.ledger_value(fd.LedgerInfo(spec.ledger_id, True, spec.fenced, key, None, None))
        records.append(Record(fd.LEDGERS_KEY.build(spec.ledger_id), seq, int(ValueType.VALUE), value))
    write_db(os.path.join(current, LEDGERS_DB), [(0, records)])
    got = [(code.name, f["ledger"]) for code, f in check_ledgers(CheckContext(discover(root)))]
    assert got == [("DBINDEX_MASTER_KEY_MISMATCH", 11)]


def test_every_explicit_lac_the_ledgers_index_holds_is_checked_without_a_journal_record(tmp_path):
    """The journals that recorded the explicit LACs are gone (a bookie deletes journals once checkpointed):
    each body the ledgers index holds is checked on its own, as an index file's is: its length, its
    ledger id and, with the digest type in metadata, its digest."""
    import dataclasses
    import glob

    from bkdisk.bookie.writer import write_metadata_dir
    from bkdisk.formats import dbledger as fd
    from bkdisk.formats.digests import master_key
    from bkdisk.formats.rocksdb import ValueType
    from bkdisk.fsck.context import CheckOptions
    from bkdisk.rocksdbfiles.sst import Record
    from bkdisk.rocksdbfiles.writer import write_db
    root, md = str(tmp_path / "bk"), str(tmp_path / "md")
    spec = BookieSpec(_ledgers(), storage="rocksdb")
    write_bookie(spec, root)
    write_metadata_dir(spec, md)
    for p in glob.glob(os.path.join(root, "journal", "current", "*.txn")):
        os.remove(p)
    current = os.path.join(root, "ledgers", "current")
    shutil.rmtree(os.path.join(current, LEDGERS_DB))
    with_lac = {l.ledger_id: lac_body(dataclasses.replace(l, explicit_lac=4)) for l in spec.ledgers}
    stored = {3: with_lac[3][:8], 7: with_lac[7], 12: with_lac[12][:-1] + bytes([with_lac[12][-1] ^ 1]),
              HIGH: with_lac[11]}   # (3: too short; 7: good; 12: its digest fails; HIGH: another ledger's)
    records = []
    for seq, l in enumerate(spec.ledgers, 1):
        value = fd.ledger_value(fd.LedgerInfo(l.ledger_id, True, l.fenced, master_key(l.password),
                                              stored.get(l.ledger_id), None))
        records.append(Record(fd.LEDGERS_KEY.build(l.ledger_id), seq, int(ValueType.VALUE), value))
    write_db(os.path.join(current, LEDGERS_DB), [(0, records)])
    got = {f["ledger"]: (code.name, f["detail"])
           for code, f in check_ledgers(CheckContext(discover(root), CheckOptions(metadata_dir=md)))}
    assert got == {3: ("DBINDEX_EXPLICIT_LAC_BAD", "at least 16 bytes, found 8"),
                   12: ("DBINDEX_EXPLICIT_LAC_BAD", f"a digest that verifies with the ledger's digest type in "
                        f"metadata, found {stored[12].hex()}: a client reading the ledger's LAC from this bookie "
                        f"gets it"),
                   HIGH: ("DBINDEX_EXPLICIT_LAC_BAD", f"ledger id {HIGH} in the body, found 11")}
