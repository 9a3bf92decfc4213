"""``bkdisk read-ledger``: one ledger's entries, in id order, from any intact copy on the disks given.

Each disk is read through its own index (bookie/ledger_copies.py), never by a scan of every log
unless that index is damaged; entries stream out a chunk at a time (bookie/ledger_read.py).
specs/read-ledger.md states the rules; specs/schemas/read-ledger-entry.schema.json the lines.
"""
from __future__ import annotations

import os
import sys

import click

from bkdisk.commandline.exit_codes import EXIT_OK, EXIT_PROBLEMS
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import ledger_options
from bkdisk.commandline.output import HELP_OPTIONS, warn
from bkdisk.commandline.runner import one_line_errors
from bkdisk.formats.errors import BkdiskError
from bkdisk.fsck.entry_ranges import ranges
from bkdisk.metaservice import token_source

json = lazy_import("json")
ledger_copies = lazy_import("bkdisk.bookie.ledger_copies")
ledger_read = lazy_import("bkdisk.bookie.ledger_read")
password_candidates = lazy_import("bkdisk.bookie.password_candidates")
metadata_dir = lazy_import("bkdisk.bookie.metadata_dir")
bookie_view = lazy_import("bkdisk.metaservice.bookie_view")
metadata_client = lazy_import("bkdisk.metaservice.client")
audit_cli = lazy_import("bkdisk.audit.cli")        # read_disks_file, for --disks-file only


class ReadLedgerError(BkdiskError):
    """read-ledger could not run: no disk, a disk that is not a bookie's, metadata that cannot be read."""


def _entry_id(ctx, param, value: int | None) -> int | None:
    # (an entry id is a Java long: no entry lies past 2^63-1)
    if value is not None and not 0 <= value < 1 << 63:
        raise click.BadParameter(f"expected an entry id from 0 to {(1 << 63) - 1}, found {value}")
    return value


@click.command("read-ledger", context_settings=HELP_OPTIONS)
@click.argument("disks", nargs=-1, metavar="DISK...")
@ledger_options
@click.option("--disks-file", default=None, metavar="FILE",
              help="Disks, one per line: path, or bookie_id<TAB>path[<TAB>host] (as the audit takes them).")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Folder of ledger metadata files: the last entry, digest type and password (HMAC).")
@click.option("--metadata", "metadata_url", default=None, metavar="grpc://HOST:PORT",
              help="Read the ledger's metadata from the metadata service instead.")
@click.option("--password-candidates", "candidates_file", default=None, metavar="FILE",
              help="Without a password from metadata: passwords to try, one a line (the empty one always), "
                   "against the master key the disks keep; the one that matches verifies HMAC digests.")
@click.option("--from", "first", type=int, default=0, callback=_entry_id, help="First entry id (default 0).")
@click.option("--to", "last", type=int, default=None, callback=_entry_id,
              help="Last entry id (default: the metadata's last entry, else the highest any disk holds).")
@click.option("--jsonl", is_flag=True, help="One JSON object per entry (specs/schemas/read-ledger-entry.schema.json).")
@one_line_errors
def read_ledger_command(disks, ledger, disks_file, metadata_dir, metadata_url, candidates_file, first, last,
                        jsonl) -> None:
    """Print a ledger's entries in id order, each from an intact copy on any of the disks.

    Without --jsonl, one line per entry: id, bookie of the copy used, payload SHA-256 (or LOST).
    Exit 0 when every entry has an intact copy, 4 when some are lost or no disk holds the ledger,
    8 when it could not run (a disk that is not a bookie, unreadable metadata).

    \b
    Examples:
      bkdisk read-ledger --ledger-id 16 /mnt/bk1 /mnt/bk2 /mnt/bk3 --jsonl
      bkdisk read-ledger --ledger-id 16 --disks-file disks.tsv --metadata grpc://127.0.0.1:4183 --jsonl
      bkdisk read-ledger --ledger-id 16 /mnt/bk1 /mnt/bk2 --password-candidates passwords.txt --jsonl
    """
    if ledger is None:
        raise click.UsageError("read-ledger needs --ledger-id (or --ledger-qualified-name)")
    if metadata_dir is not None and metadata_url is not None:
        raise click.UsageError("give --metadata-dir or --metadata, not both")
    if metadata_url is not None and not metadata_url.startswith("grpc://"):
        raise click.UsageError(f"--metadata takes grpc://HOST:PORT, not {metadata_url!r}")
    if last is not None and last < first:
        raise click.UsageError(f"--to {last} is before --from {first}")
    given = [(d, None) for d in disks]
    if disks_file:
        given += [(d.path, d.bookie_id) for d in audit_cli.read_disks_file(disks_file)]
    if not given:
        raise click.UsageError("give the disks: DISK... or --disks-file")
    opened = [ledger_copies.open_disk(path, bid) for path, bid in given]
    md = None
    source = metadata_dir if metadata_dir is not None else metadata_url
    if source is not None:
        md = _metadata(source, ledger)
    password = None
    if candidates_file is not None and (md is None or md.password is None):
        password = _password(opened, ledger, password_candidates.read_candidates(candidates_file))
    done = ledger_read.LedgerRead()
    said = 0
    out = sys.stdout
    for e in ledger_read.read_ledger(opened, ledger, md, first, last, done, password):
        said = _say_scans(done, said)       # before the first entry: every disk's index is opened by then
        if jsonl:
            out.write(json.dumps(e.to_json()) + "\n")
        elif e.lost:
            out.write(f"{e.entry_id}\tLOST\n")
        else:
            doc = e.to_json()
            out.write(f"{e.entry_id}\t{doc['bookie']}\t{doc['payload_sha256']}\n")
    _say_scans(done, said)
    out.flush()
    for path, why in done.unreadable.items():
        warn(f"{path}: {why}: the entries it holds were not read from it")
    if done.disagree:
        which = f"entry {ranges(done.disagree)}" if len(done.disagree) == 1 else f"entries {ranges(done.disagree)}"
        warn(f"{which}: the copies differ and no digest could be verified (no password or digest type): the first "
             f"disk's copy was given; --metadata-dir or --password-candidates tells which one is right")
    if not done.held_anywhere and md is None:
        click.echo(f"bkdisk: ledger {ledger.qualified_name if ledger.scope else ledger.ledger}: no disk given "
                   f"holds it and no metadata names it", err=True)
        sys.exit(EXIT_PROBLEMS)
    if done.lost:
        click.echo(f"bkdisk: {done.lost} of {done.entries} entries lost (no intact copy)", err=True)
    sys.exit(EXIT_PROBLEMS if done.lost else EXIT_OK)


def _password(opened, ledger, candidates: list[bytes]) -> bytes | None:
    """The password whose master key the disks keep, or None with a warning saying why not (HMAC
    copies then stay not verified)."""
    kept = [(d.bookie_id, ledger_copies.master_key(d, ledger)) for d in opened]
    m = password_candidates.match_kept_keys(kept, candidates, sources=".idx header or ledgers index entry")
    if m.password is None:
        warn(f"ledger {ledger.qualified_name if ledger.scope else ledger.ledger}: no password: {m.why}; "
             "HMAC digests stay not verified")
    return m.password


def _say_scans(done, said: int) -> int:
    for root, why in done.scanned[said:]:
        warn(f"{root}: the ledger's index is damaged ({why}); its entry logs were scanned instead")
    for root, a in done.searched[max(0, said - len(done.scanned)):]:
        warn(f"{root}: entries the metadata places on this disk are in no disk's index, from entry {a} on (an index "
             "cut short?): its entry logs were searched for them")
    return len(done.scanned) + len(done.searched)


def _metadata(source: str, ledger):
    """The ledger's metadata, None when the folder or the service has none for it. A folder that
    cannot be listed, a file of it that does not parse, or a service that cannot be reached (after
    one retry: a person waits) is one line, exit 8: never taken for "no metadata"."""
    if not source.startswith("grpc://"):
        if not os.path.isdir(source):
            raise ReadLedgerError(f"{source}: cannot list the metadata folder (not a folder)")
        return metadata_dir.read_ledger_file(source, ledger)
    try:
        return bookie_view.read_ledger(metadata_client.service_target(source), ledger, timeout=10.0, retries=1,
                                       token=token_source.env_token())
    except BkdiskError as e:    # (the client's MetadataError)
        raise ReadLedgerError(f"cannot read ledger metadata from {source}: {e}") from None
