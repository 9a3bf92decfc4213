"""``bkdisk space``: where a bookie's disk space goes, per entry log, ledger and topic, and what its
garbage collector and each compaction pass would free (bookie/space.py; rules in specs/space.md)."""
from __future__ import annotations

import os
import sys

import click

from bkdisk.bookie.layout import LayoutError, bookie_id_of, discover, from_conf
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.output import warn
from bkdisk.commandline.runner import one_line_errors
from bkdisk.diskio.config import collector_eased
from bkdisk.formats.byte_sizes import human_bytes

gc_policy = lazy_import("bkdisk.bookie.gc_policy")
layout_pass = lazy_import("bkdisk.fsck.passes.p1_layout")
metadata_dir_reader = lazy_import("bkdisk.bookie.metadata_dir")
bookie_space = lazy_import("bkdisk.bookie.space")
metadata_client = lazy_import("bkdisk.metaservice.client")
service_view = lazy_import("bkdisk.metaservice.bookie_view")
token_source = lazy_import("bkdisk.metaservice.token_source")
orjson = lazy_import("orjson")

def _metadata(metadata_dir: str | None, url: str | None, bookie: str | None):
    """The ledger metadata as the bookie's accounting asks for it (bookie.metadata_dir.MetadataView: the
    ledgers that place entries on ``bookie`` held as columns, any other read when asked), and where from."""
    if metadata_dir:
        md, errors = metadata_dir_reader.bookie_metadata_dir(metadata_dir, bookie)
        if errors:   # a ledger whose metadata cannot be read would count as deleted: refuse instead
            raise errors[0]
        return md, f"metadata folder {metadata_dir}"
    if url:
        return service_view.bookie_view(metadata_client.service_target(url), bookie, retries=2,
                                        token=token_source.env_token()), f"metadata service {url}"
    return None, None


def _one_bookie(given: str, dirs) -> None:
    """Refuse dirs that are not one bookie's (copies of one bookie, or a bookie without cookies beside
    another): their logs and totals would be merged into one report. bookie-fsck reports the same
    COOKIE_MISMATCH."""
    bad = layout_pass.cookie_mismatches(dirs)
    if bad:
        f = bad[0]
        parents = sorted({os.path.dirname(d) for d in dirs.all_dirs})
        raise LayoutError(f"{given}: the dirs found in {', '.join(parents)} are not one bookie's: {f.code} {f.path}: "
                          f"{f.message}; give the folder of one bookie")


@click.command("space")
@click.argument("root", required=False)
@click.option("--conf", "conf", default=None, metavar="bk_server.conf",
              help="The bookie's dirs and its garbage-collection settings from a BookKeeper server config.")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Folder of ledger metadata files (<hex id>.bin/.txt).")
@click.option("--metadata", "metadata_url", default=None, metavar="grpc://HOST:PORT",
              help="Read ledger metadata from the metadata service instead of a folder "
                   "(its token from env BKDISK_METADATA_TOKEN).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line: logs, ledgers, topics, a summary.")
@click.option("--scan", is_flag=True,
              help="Count every log's bytes from its entries, not from its ledgers map (and say where they differ).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Rows of ledgers and topics in the text report and the summary.")
@one_line_errors
@collector_eased()
def space(root: str | None, conf: str | None, metadata_dir: str | None, metadata_url: str | None, as_json: bool,
          scan: bool, top: int) -> None:
    """Where the disk space of the bookie under ROOT (or of --conf) goes: each entry log's live and
    garbage bytes, its oldest live ledger and topic, and what the bookie's garbage collector would do
    with it (delete, compact-minor, compact-major, keep; current: still written); the ledgers and
    Pulsar topics that pin old logs. GC settings come from --conf, else BookKeeper's defaults.
    Without metadata, a ledger is live when the bookie's own index has it.

    Exit 0 with the report, 8 when what it needs cannot be read.

    \b
    Examples:
      bkdisk space /mnt/bookie1 --metadata-dir ./metadata
      bkdisk space --conf /etc/bookkeeper/bk_server.conf --metadata grpc://127.0.0.1:4183 --json
    """
    if metadata_url and metadata_dir:
        raise click.UsageError("--metadata and --metadata-dir exclude each other")
    if conf is not None and root is None:
        given, dirs = conf, from_conf(conf)
    elif root is not None and conf is None:
        given, dirs = root, discover(root)
    else:
        raise click.UsageError("give the bookie's ROOT folder or --conf bk_server.conf (one of them)")
    _one_bookie(given, dirs)
    settings = gc_policy.settings_from_conf(conf)
    md, where = _metadata(metadata_dir, metadata_url, bookie_id_of(dirs))
    report = bookie_space.account_bookie(dirs, md, settings, metadata_from=where, scan=scan, top=top)
    for w in report.warnings:
        warn(w)
    if as_json:
        out = sys.stdout.buffer
        dumps = orjson.dumps
        for row in report.rows():   # (a line at a time: a million ledgers' rows are never one text)
            out.write(dumps(row) + b"\n")
    else:
        out = sys.stdout
        render_text(report, out, top)
    out.flush()


def render_text(report, out, top: int) -> None:
    s = report.summary
    w = out.write
    w(f"bookie {s['bookie_id'] or '?'} ({s['storage']}): {s['logs']} entry logs, {human_bytes(s['size'])}; "
      f"live {human_bytes(s['live_bytes'])}, garbage {human_bytes(s['garbage_bytes'])}\n")
    w(f"liveness: {s['liveness']}" + (f" ({s['metadata']})" if s["metadata"] else "") + "\n")
    g = s["settings"]
    w(f"GC settings ({g['source']}): minor compaction below {g['minorCompactionThreshold']} every "
      f"{g['minorCompactionInterval']} s ({'on' if g['minorCompactionEnabled'] else 'off'}), major below "
      f"{g['majorCompactionThreshold']} every {g['majorCompactionInterval']} s "
      f"({'on' if g['majorCompactionEnabled'] else 'off'}); isForceGCAllowWhenNoSpace "
      f"{str(g['isForceGCAllowWhenNoSpace']).lower()}\n\n")
    logs = sorted(report.logs, key=lambda r: (-r["size"], r["ledger_dir"], r["log_id"]))
    w(f"{'entry log':<24} {'size':>10} {'live':>10} {'garbage':>10} {'usage':>6}  {'action':<13} oldest live ledger\n")
    for r in logs:
        oldest = r["oldest_live_ledger"] or "-"
        if r["oldest_live_topic"]:
            oldest += f" ({r['oldest_live_topic']})"
        w(f"{r['ledger_dir'] + '/' + format(r['log_id'], 'x') + '.log':<24} {human_bytes(r['size']):>10} "
          f"{human_bytes(r['live_bytes']):>10} {human_bytes(r['garbage_bytes']):>10} "
          f"{r['usage']:>6.2f}  {r['action']:<13} "
          f"{oldest}\n")
    w(f"{'total':<24} {human_bytes(s['size']):>10} {human_bytes(s['live_bytes']):>10} "
      f"{human_bytes(s['garbage_bytes']):>10}\n\n")
    for a, b in s["by_action"].items():
        if b["logs"]:
            w(f"  {a:<13} {b['logs']:>6} logs {human_bytes(b['size']):>10}\n")
    w(f"GC frees now: {human_bytes(s['gc_frees_bytes'])} (logs with no live ledger); a minor compaction pass: "
      f"{human_bytes(s['minor_compaction_frees_bytes'])}; "
      f"a major pass: {human_bytes(s['major_compaction_frees_bytes'])}\n")
    states = ", ".join(f"{k} {v['ledgers']} ({human_bytes(v['bytes'])})"
                       for k, v in s["by_state"].items() if v["ledgers"])
    w(f"ledgers: {states or 'none'}\n")
    if s["top_pinning_ledgers"]:
        w("\nledgers whose deletion would free the most old logs:\n")
        for p in s["top_pinning_ledgers"]:
            w(f"  {p['ledger']:<20} frees {p['sole_logs']:>5} logs, {human_bytes(p['frees_bytes']):>10}"
              + (f"  {p['topic']}" if p["topic"] else "") + "\n")
    if report.topics:
        w("\ntopics (biggest first):\n")
        for t in report.topics[:top]:
            w(f"  {t['topic']:<48} {t['ledgers']:>6} ledgers {human_bytes(t['bytes']):>10}, pins {t['pinned_logs']} "
              f"logs, frees {t['sole_logs']} ({human_bytes(t['frees_bytes'])})\n")
    for db in s["rocksdb"] or []:
        w(f"\nRocksDB in {db['ledger_dir']}: {_database(db, 'locations', True)}, {_database(db, 'ledgers', False)}; "
          f"SST files holding only deleted ledgers: {len(db['stale_sst'])} ({human_bytes(db['stale_sst_bytes'])})\n")
        for t in db["stale_sst"]:
            w(f"  {t['database']}/{t['file']} level {t['level']} {human_bytes(t['bytes'])} "
              f"ledgers {t['first_ledger']}.."
              f"{t['last_ledger']}\n")


def _database(db: dict, name: str, files_shown: bool) -> str:
    """One RocksDB database of a ledger dir: its bytes (and SST files), or why its files were not judged."""
    size = "size unknown" if db[f"{name}_bytes"] is None else human_bytes(db[f"{name}_bytes"])
    if db[f"{name}_sst_files"] is None:   # (the warning above says why)
        return f"{name} {size} (its MANIFEST cannot be read: SST files not counted nor judged)"
    return f"{name} {size}" + (f" ({db[f'{name}_sst_files']} SST files)" if files_shown else "")
