"""The commands that read bookie disks never write into them: `audit --out/--state`, `salvage --out` and
`scan-disk --out/--state` inside a disk read (its root, or a dir its bk_server.conf names anywhere) are
refused in one line before any disk is read or Spark starts, as are an output and a state that overlap
and a scan-disk output that is a folder. The disks are byte for byte as before."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import GOLDEN
from fsck_helpers import snapshot

BKDISK = [sys.executable, "-c", "from bkdisk.cli import main; main()"]


@pytest.fixture()
def cluster(tmp_path):
    shutil.copytree(GOLDEN / "cluster-3", tmp_path / "c")
    return tmp_path / "c"


def _refused(*args: str, words: str) -> None:
    p = subprocess.run([*BKDISK, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 8 and p.stderr.strip().splitlines() == [p.stderr.strip()], p.stderr
    assert words in p.stderr and "Traceback" not in p.stderr and "Spark" not in p.stderr, p.stderr


def test_no_output_or_state_inside_a_disk_read(cluster, tmp_path):
    b = cluster / "bookies"
    disks = [str(b / n) for n in ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")]
    md = ["--metadata-dir", str(cluster / "metadata")]
    conf = tmp_path / "bk.conf"      # a disk named by its configuration: its dirs, wherever they are
    conf.write_text(f"journalDirectories={b / 'bk-2.rack-a' / 'journal'}\n"
                    f"ledgerDirectories={b / 'bk-2.rack-a' / 'ledgers'}\n")
    before = snapshot(str(cluster))
    inside = "which this command reads; expected a place outside every disk"
    _refused("audit", *disks, *md, "--out", str(b / "bk-3.rack-b" / "ledgers" / "aud"), words="--out is inside")
    _refused("audit", *disks, *md, "--out", str(tmp_path / "o"), "--state", str(b / "bk-1.rack-a" / "st"),
             words="--state is inside the disk")
    _refused("audit", disks[0], str(conf), *md, "--out", str(b / "bk-2.rack-a" / "ledgers" / "current" / "o"),
             words=f"a dir of the disk {conf}, {inside}")
    _refused("audit", *disks, *md, "--out", str(tmp_path / "st"), "--state", str(tmp_path / "st"),
             words="--out and --state")
    _refused("salvage", *disks, "--out", str(b / "bk-1.rack-a" / "ledgers0" / "salv"), words=inside)
    _refused("salvage", *disks, "--out", str(tmp_path / "salv"), "--tmp-dir", str(b / "bk-1.rack-a" / "ledgers0"),
             words="--tmp-dir is inside")
    _refused("scan-disk", disks[0], "--out", str(b / "bk-1.rack-a" / "ledgers0" / "current" / "x.parquet"),
             words=inside)
    _refused("scan-disk", disks[0], "--out", str(tmp_path / "s.parquet"), "--state", str(tmp_path / "s.parquet"),
             words="--out and --state")
    os.mkdir(tmp_path / "folder")
    _refused("scan-disk", disks[0], "--out", str(tmp_path / "folder"), words="is a folder")
    assert snapshot(str(cluster)) == before and os.listdir(tmp_path / "folder") == []
    out = tmp_path / "beside.parquet"                 # beside the disks: written
    p = subprocess.run([*BKDISK, "scan-disk", disks[0], "--out", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and out.is_file(), p.stderr
    assert snapshot(str(cluster)) == before


def test_salvage_refuses_disks_of_two_clusters_before_spark(cluster):
    """Ledger ids repeat across clusters: copies of two clusters' ledgers 1 would be salvaged as one ledger."""
    other = cluster / "bookies" / "bk-2.rack-a"
    for cookie in other.glob("*/current/VERSION"):
        cookie.write_text(cookie.read_text().replace("c0ffee000003", "deadbeef0003"))
    disks = sorted(str(p) for p in (cluster / "bookies").iterdir())
    _refused("salvage", *disks, "--out", str(cluster.parent / "s"), words="disks of two clusters")
    assert not (cluster.parent / "s").exists()


def test_salvage_refuses_a_disk_whose_cookie_records_no_instance_id_beside_one_that_does(cluster):
    """BookKeeper's cookie check tells a cookie without an instance id from one with any (Cookie.verifyInternal):
    such a disk is of another cluster, or of none."""
    import re
    other = cluster / "bookies" / "bk-2.rack-a"
    for cookie in other.glob("*/current/VERSION"):
        cookie.write_text(re.sub(r"instanceId: \"[^\"]*\"\n", "", cookie.read_text()))
    disks = sorted(str(p) for p in (cluster / "bookies").iterdir())
    _refused("salvage", *disks, "--out", str(cluster.parent / "s"), words="no instance id")
    assert not (cluster.parent / "s").exists()


def test_what_killed_runs_left_beside_an_output_goes_with_the_next_run(cluster, tmp_path):
    """A salvage's work folder, a scan-disk's unfinished file, an audit's scratch folder: each left by a run
    killed before it could remove it, and removed by the next run there; one a running process owns is kept."""
    from bkdisk.audit.cli import prepare_out
    from bkdisk.diskio.run_owned import own_prefix, start_time
    from bkdisk.salvage_cli import work_folder

    dead = _gone_pid()
    for_salvage = tmp_path / f".s.salvage-{dead}-1-abc"
    for_salvage.mkdir()
    alive = tmp_path / f"{own_prefix('.s.salvage-')}xyz"     # this process's: it runs
    alive.mkdir()
    work = work_folder(str(tmp_path / "s"))
    assert not for_salvage.exists() and alive.is_dir() and os.path.isdir(work)
    unfinished = tmp_path / f".x.parquet.tmp-{dead}-{start_time(os.getpid())}-parquet"
    unfinished.write_bytes(b"half")
    p = subprocess.run([*BKDISK, "scan-disk", str(cluster / "bookies" / "bk-1.rack-a"), "--out",
                        str(tmp_path / "x.parquet")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and not unfinished.exists(), p.stderr
    assert [n for n in os.listdir(tmp_path) if ".tmp-" in n] == []
    out = tmp_path / "audit"
    (out / ".scratch-killedrun" / "rows").mkdir(parents=True)
    (out / ".bkdisk-audit").write_text("")
    prepare_out(str(out))
    assert os.listdir(out) == [".bkdisk-audit"]


def _gone_pid() -> int:
    """The id of a process that has ended."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_one_bookie_given_as_its_root_and_as_its_configuration_is_refused(cluster, tmp_path):
    """Its copies would be counted twice (salvage said 160 copies of a ledger of 120)."""
    b = cluster / "bookies" / "bk-2.rack-a"
    conf = tmp_path / "bk2.conf"
    conf.write_text(f"journalDirectories={b / 'journal'}\nledgerDirectories={b / 'ledgers'}\n")
    disks = sorted(str(p) for p in (cluster / "bookies").iterdir())
    for command in (["salvage"], ["audit", "--metadata-dir", str(cluster / "metadata")]):
        _refused(*command, *disks, str(conf), "--out", str(tmp_path / "o"), words="give each bookie once")
