"""``bkdisk demo``: write a sample bookie disk with the bookie writer and run fsck over it, then write a
small 4-bookie cluster and audit it with Spark on local[2] (the report's path is printed)."""
from __future__ import annotations

import os
import random
import shutil
import sys

import click

from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.runner import one_line_errors
from bkdisk.formats.digests import DigestType
from bkdisk.formats.paths import CURRENT_DIR

# The writer, the checker (numba) and the cluster part of the demo (the Spark audit) load when the
# demo runs, not for its --help.
writer = lazy_import("bkdisk.bookie.writer")
fsck_api = lazy_import("bkdisk.fsck.api")
fsck_context = lazy_import("bkdisk.fsck.context")
fsck_report = lazy_import("bkdisk.fsck.report")
audit_cli = lazy_import("bkdisk.audit.cli")
audit_rows = lazy_import("bkdisk.audit.rows")
cluster = lazy_import("bkdisk.bookie.cluster")


def sample_spec(seed: int = 7) -> BookieSpec:
    """A small bookie with every digest type, scope-0 and scoped (BP-35) ledgers, fencing and explicit LAC."""
    rnd = random.Random(seed)

    def payloads(n, lo, hi):
        return [rnd.randbytes(rnd.randint(lo, hi)) for _ in range(n)]

    ledgers = [
        LedgerSpec(0, payloads(40, 0, 2000), DigestType.CRC32, b"p0"),
        LedgerSpec(1, payloads(30, 100, 70000), DigestType.CRC32C, b"pw-one"),
        LedgerSpec(255, payloads(25, 1, 5000), DigestType.HMAC, b"mac-secret", explicit_lac=20),
        LedgerSpec(256, payloads(20, 0, 300), DigestType.DUMMY, b""),
        LedgerSpec(0x1234, payloads(35, 10, 9000), DigestType.CRC32C, b"fence-me", fenced=True),
        LedgerSpec(0x42, payloads(30, 10, 4000), DigestType.CRC32C, b"scoped", scope_id=0x5EED0000CAFE),
        LedgerSpec(0x7, payloads(12, 10, 4000), DigestType.HMAC, b"scoped-mac", scope_id=0xDEADBEEF00000001,
                   fenced=True),
    ]
    return BookieSpec(ledgers, bookie_id="bookie-demo-1.rack-a", journal_dirs=["journal"],
                      ledger_dirs=["ledgers0", "ledgers1"], entry_log_size_limit=256 * 1024)


@click.command()
@click.option("--out", type=click.Path(file_okay=False), default="demo-out", show_default=True,
              help="Folder for the sample bookie (replaced if it holds a previous demo).")
@click.option("--json", "as_json", is_flag=True, help="Print the fsck report as JSON.")
@click.option("--audit/--no-audit", "with_audit", default=True, show_default=True,
              help="After fsck, write a small 4-bookie cluster and audit it with Spark (local[2]).")
@one_line_errors
def demo(out: str, as_json: bool, with_audit: bool) -> None:
    """Write a sample bookie disk, check it with fsck, then audit a small generated cluster with
    Spark (the embedded default job)."""
    bookie_root = os.path.join(out, "bookie")
    md_dir = os.path.join(out, "metadata")
    if os.path.exists(os.path.join(out, ".bkdisk-demo")):
        shutil.rmtree(out)
    elif os.path.exists(out) and os.listdir(out):
        raise click.UsageError(f"{out} exists and is not a previous demo folder; choose another --out")
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, ".bkdisk-demo"), "w").close()
    spec = sample_spec()
    w = writer.write_bookie(spec, bookie_root)
    writer.write_metadata_dir(spec, md_dir)
    # Counted as fsck counts them: every entry log on disk, the one preallocated for the next writes too.
    logs = [os.path.join(d, CURRENT_DIR, n) for d in discover(bookie_root).ledger_dirs
            for n in os.listdir(os.path.join(d, CURRENT_DIR)) if n.endswith(".log")]
    empty = sum(1 for p in logs if os.path.getsize(p) == 0)
    click.echo(f"wrote a sample bookie at {bookie_root}: {len(spec.ledgers)} ledgers, {len(w.entries)} entries, "
               f"{len(logs)} entry logs" + (f" ({empty} preallocated, still empty)" if empty else "")
               + f", {len(w.journal_files)} journals; metadata in {md_dir}", err=as_json)
    report = fsck_api.check_bookie(discover(bookie_root), fsck_context.CheckOptions(metadata_dir=md_dir))
    if as_json:
        fsck_report.render_json(report, sys.stdout)
    else:
        fsck_report.render_text(report, sys.stdout)
    if with_audit:
        _audit_demo(out, as_json)
    sys.exit(report.exit_code)


def _audit_demo(out: str, as_json: bool) -> None:
    """The cluster part of the demo: 4 writer-built bookies (one of them DbLedgerStorage), their metadata,
    the local Spark audit."""
    spec = cluster.sample_cluster(4, entries=30, max_payload=2000, db_bookies=1)
    w = cluster.write_cluster(spec, os.path.join(out, "cluster"))
    click.echo(f"wrote a 4-bookie cluster (one DbLedgerStorage) at {w.root}: {len(w.placement)} entries striped "
               f"over ensembles; metadata in {w.metadata_dir}", err=as_json)
    audit_out = os.path.join(out, "audit")
    disks = [audit_rows.DiskInput(r) for r in w.bookie_roots.values()]
    code = audit_cli.run_audit_command(disks, [], w.metadata_dir, audit_out, "local[2]", {}, "demo")
    click.echo(f"audit {'healthy' if code == 0 else 'found problems'}; tables in {audit_out}; "
               f"HTML report: {os.path.abspath(os.path.join(audit_out, 'report.html'))}", err=as_json)
