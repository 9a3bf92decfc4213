"""Scan commands ease Python's cyclic garbage collector for their work (diskio.config.collector_eased:
what exists is frozen, the young generation collected less often) and give it back as they found it:
fsck, inventory and the audit's per-disk scan run eased, and a long-lived caller (this test process,
a Spark worker) has its own settings again afterwards."""
from __future__ import annotations

import gc
import threading

import pytest
from click.testing import CliRunner

from bkdisk.diskio.config import YOUNG_COLLECTION_EVERY, collector_eased, freeze_loaded

HEALTHY = "interleaved-v6-hostport"


@pytest.fixture
def collector_default():
    was, threshold = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*threshold)
    if not was:
        gc.disable()


def _eased() -> bool:
    return gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY and gc.get_freeze_count() > 0


def _recorded(module, name: str, monkeypatch) -> list[bool]:
    """Replace ``module.name`` by a wrapper that records, on each call, whether the collector is eased."""
    seen: list[bool] = []
    real = getattr(module, name)

    def recorded(*a, **kw):
        seen.append(_eased())
        return real(*a, **kw)
    monkeypatch.setattr(module, name, recorded)
    return seen


def test_eased_inside_frozen_then_restored(collector_default):
    assert gc.get_freeze_count() == 0
    with collector_eased():
        assert _eased()
        assert gc.isenabled()   # still collecting: cycles made during a scan are freed
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_what_is_loaded_while_eased_is_frozen_too_and_thawed_after(collector_default):
    class Loaded:
        pass
    freeze_loaded()   # outside: the collector is left as it is
    assert gc.get_freeze_count() == 0
    with collector_eased():
        made = Loaded()
        assert any(o is made for o in gc.get_objects())
        freeze_loaded()
        assert not any(o is made for o in gc.get_objects())
    assert gc.get_freeze_count() == 0 and any(o is made for o in gc.get_objects())


def test_cycles_made_while_eased_are_still_collected(collector_default):
    import weakref

    class Node:
        pass
    with collector_eased():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None


def test_restored_when_the_work_raises(collector_default):
    with pytest.raises(ZeroDivisionError):
        with collector_eased():
            _ = 1 / 0
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_caller_that_turned_it_off_keeps_it_off(collector_default):
    gc.disable()
    with collector_eased():
        with collector_eased():
            pass
        assert not gc.isenabled() and _eased()
    assert not gc.isenabled()


def test_a_freeze_the_process_made_before_is_kept(collector_default):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with collector_eased():
            pass
        # still frozen (the count drops only by frozen objects freed meanwhile; thawed, it is 0)
        assert gc.get_freeze_count() > frozen // 2
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.unfreeze()


def test_overlapping_callers_on_threads_keep_it_eased_until_the_last_leaves(collector_default):
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with collector_eased():
            inside.set()
            leave.wait(10)
    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with collector_eased():
        leave.set()
        t.join(10)
        assert not t.is_alive()
        assert _eased()   # the other caller left first: still eased for this one
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_fsck_checks_with_the_collector_eased(golden, collector_default, monkeypatch):
    import bkdisk.fsck.api
    from bkdisk.fsck_cli import fsck_command
    seen = _recorded(bkdisk.fsck.api, "check_bookie", monkeypatch)
    r = CliRunner().invoke(fsck_command, [str(golden / HEALTHY), "--no-progress", "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert seen == [True]
    assert gc.get_threshold() == (700, 10, 10)


def test_inventory_scans_with_the_collector_eased(golden, collector_default, monkeypatch):
    import bkdisk.inventory_cli
    seen = _recorded(bkdisk.inventory_cli, "inventory_bookie", monkeypatch)
    r = CliRunner().invoke(bkdisk.inventory_cli.inventory, [str(golden / HEALTHY), "--jsonl"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert seen == [True]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_audit_scan_child_checks_with_the_collector_eased(golden, collector_default, monkeypatch):
    import bkdisk.fsck.api
    from bkdisk.audit.rows import DiskInput, RunInfo, scan_disk, split_tables
    from bkdisk.bookie.metadata_dir import load_metadata_dir
    real = bkdisk.fsck.api.check_bookie

    def only_eased(*a, **kw):   # in the forked child: a failure here makes the disk not_audited
        if not _eased():
            raise RuntimeError("the scan ran with the collector's default settings")
        return real(*a, **kw)
    monkeypatch.setattr(bkdisk.fsck.api, "check_bookie", only_eased)
    root = golden / "cluster-3"
    md, errors = load_metadata_dir(str(root / "metadata"))
    assert not errors
    t = split_tables(scan_disk(DiskInput(str(root / "bookies" / "bk-1.rack-a")), md, RunInfo("r", "0", "h")))
    (row,) = t["disks"].to_pylist()
    assert row["status"] == "ok", row["error"]
    assert gc.get_threshold() == (700, 10, 10)


def _huge_advice() -> bool:
    from numpy._core.multiarray import _get_madvise_hugepage
    return bool(_get_madvise_hugepage())


def test_fsck_checks_with_numpy_arrays_in_small_pages_and_gives_the_advice_back(golden, collector_default,
                                                                                monkeypatch):
    import bkdisk.fsck.api
    from bkdisk.fsck_cli import fsck_command
    assert _huge_advice()   # numpy's default on Linux: a large array is advised into huge pages
    seen: list[bool] = []
    real = bkdisk.fsck.api.check_bookie

    def recorded(*a, **kw):
        seen.append(_huge_advice())
        return real(*a, **kw)
    monkeypatch.setattr(bkdisk.fsck.api, "check_bookie", recorded)
    r = CliRunner().invoke(fsck_command, [str(golden / HEALTHY), "--no-progress", "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert seen == [False]
    assert _huge_advice()


def test_small_pages_asked_outside_a_scan_change_nothing(collector_default):
    from bkdisk.diskio.config import arrays_in_small_pages
    arrays_in_small_pages()
    assert _huge_advice()
    with collector_eased():
        with collector_eased():
            arrays_in_small_pages()
            assert not _huge_advice()
        assert not _huge_advice()   # until the last caller leaves
    assert _huge_advice()
