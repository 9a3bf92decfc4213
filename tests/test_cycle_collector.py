"""Scan commands pause Python's cyclic garbage collector for their work (diskio.config), and give it
back as they found it: fsck, inventory and the audit's per-disk scan run with it paused, and a
long-lived caller (this test process, a Spark worker) has it running again afterwards."""
from __future__ import annotations

import gc

import pytest
from click.testing import CliRunner

from diskio.config import cycle_collector_paused

HEALTHY = "interleaved-v6-hostport"


@pytest.fixture
def collector_running():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def _paused_while(module, name: str, monkeypatch) -> list[tuple[bool, int]]:
    """Replace ``module.name`` by a wrapper that records (collector enabled, frozen objects) on each call."""
    seen: list[tuple[bool, int]] = []
    real = getattr(module, name)

    def recorded(*a, **kw):
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return real(*a, **kw)
    monkeypatch.setattr(module, name, recorded)
    return seen


def test_paused_inside_frozen_then_restored(collector_running):
    frozen = gc.get_freeze_count()
    with cycle_collector_paused():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > frozen
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_restored_when_the_work_raises(collector_running):
    with pytest.raises(ZeroDivisionError):
        with cycle_collector_paused():
            1 / 0
    assert gc.isenabled()


def test_a_caller_that_had_it_off_keeps_it_off(collector_running):
    gc.disable()
    with cycle_collector_paused():
        with cycle_collector_paused():
            pass
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_fsck_checks_with_the_collector_paused(golden, collector_running, monkeypatch):
    import fsck.api
    from fsck.cli import fsck_command
    seen = _paused_while(fsck.api, "check_bookie", monkeypatch)
    r = CliRunner().invoke(fsck_command, [str(golden / HEALTHY), "--no-progress", "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert len(seen) == 1 and seen[0][0] is False and seen[0][1] > 0
    assert gc.isenabled()


def test_inventory_scans_with_the_collector_paused(golden, collector_running, monkeypatch):
    import bkdisk.inventory
    seen = _paused_while(bkdisk.inventory, "inventory_bookie", monkeypatch)
    r = CliRunner().invoke(bkdisk.inventory.inventory, [str(golden / HEALTHY), "--jsonl"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert len(seen) == 1 and seen[0][0] is False
    assert gc.isenabled()


def test_the_audit_scan_child_checks_with_the_collector_paused(golden, collector_running, monkeypatch):
    import fsck.api
    from audit.rows import DiskInput, RunInfo, scan_disk, split_tables
    from bookie.metadata_dir import load_metadata_dir
    real = fsck.api.check_bookie

    def only_paused(*a, **kw):   # in the forked child: a failure here makes the disk not_audited
        if gc.isenabled():
            raise RuntimeError("the scan ran with the cyclic collector running")
        return real(*a, **kw)
    monkeypatch.setattr(fsck.api, "check_bookie", only_paused)
    root = golden / "cluster-3"
    md, errors = load_metadata_dir(str(root / "metadata"))
    assert not errors
    t = split_tables(scan_disk(DiskInput(str(root / "bookies" / "bk-1.rack-a")), md, RunInfo("r", "0", "h")))
    (row,) = t["disks"].to_pylist()
    assert row["status"] == "ok", row["error"]
    assert gc.isenabled()
