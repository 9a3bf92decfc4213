"""``bkdisk metadata``: read and change ledgers through the ledger metadata service (``serve`` is
bkdisk/metadata_serve.py); and the client options and error handling ``bkdisk bookies``
(bkdisk/bookies_cli.py) shares.

gRPC, protobuf and kazoo load when a command uses them (commandline.lazy): ``--help`` costs click
and nothing else.
"""
from __future__ import annotations

import functools
import itertools
import json
import os
import sys
from collections.abc import Iterator
from typing import TypeVar

import click

from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import ledger_options, parse_id
from bkdisk.commandline.output import HELP_OPTIONS, emit
from bkdisk.commandline.progress import progress_line
from bkdisk.commandline.runner import one_line_errors
from bkdisk.commandline.token_option import checked_token_option
from bkdisk.diskio.atomic import private_file
from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.ids import LedgerId
from bkdisk.metadata_serve import serve_command
from bkdisk.metaservice import token_source

mapped = lazy_import("bkdisk.diskio.mapped")
metadata_dir = lazy_import("bkdisk.bookie.metadata_dir")
metadata_format = lazy_import("bkdisk.formats.metadata")
metadata_client = lazy_import("bkdisk.metaservice.client")
metadata_channel = lazy_import("bkdisk.metaservice.channel")
folder_import = lazy_import("bkdisk.metaservice.folder_import")

T = TypeVar("T")

DEFAULT_SERVER = "127.0.0.1:4183"
# What a script needs to tell apart: retry (8), stop (6, 7), or act on the answer (2, 3, 5). 1 and 4
# keep e2fsck's meanings (corrected, problems left) and are never a metadata command's answer.
EXIT_NOT_FOUND = 2        # the service answered: no such ledger (or bookie)
EXIT_EXISTS = 3           # create: the ledger exists already (register: a live bookie holds the id)
EXIT_BAD_VERSION = 5      # a conditional write lost: the stored version is not the expected one
EXIT_DENIED = 6           # the service refused the caller: token missing or wrong, or the store's ACLs
EXIT_BAD_REQUEST = 7      # the service refused the request itself (an id or field it does not accept)
EXIT_UNREACHABLE = 8      # the service could not be reached (or failed): e2fsck's operational error
# Each answer a client command can get that is not success, by MetadataError code: the service's
# StatusCode names, and RPC_<name> for what gRPC itself said. Any other (INTERNAL_SERVER_ERROR,
# UNEXPECTED, LEDGER_METADATA_ERROR, STORE_UNAVAILABLE after the retries, RPC_INTERNAL...) is the
# service failing: EXIT_UNREACHABLE.
EXIT_OF_CODE = {
    "LEDGER_NOT_FOUND": EXIT_NOT_FOUND,
    "BOOKIE_NOT_FOUND": EXIT_NOT_FOUND,
    "LEDGER_EXISTS": EXIT_EXISTS,
    "BOOKIE_EXISTS": EXIT_EXISTS,
    "BAD_VERSION": EXIT_BAD_VERSION,
    "PERMISSION_DENIED": EXIT_DENIED,
    "RPC_PERMISSION_DENIED": EXIT_DENIED,
    "RPC_UNAUTHENTICATED": EXIT_DENIED,
    "BAD_REQUEST": EXIT_BAD_REQUEST,
    "NOT_IMPLEMENTED": EXIT_BAD_REQUEST,          # a call this service does not answer: resending cannot help
    "RPC_INVALID_ARGUMENT": EXIT_BAD_REQUEST,
    "RPC_OUT_OF_RANGE": EXIT_BAD_REQUEST,
    "RPC_RESOURCE_EXHAUSTED": EXIT_BAD_REQUEST,   # a request above the service's --max-request-bytes
    "RPC_UNIMPLEMENTED": EXIT_BAD_REQUEST,
}
_UNREACHED = ("RPC_UNAVAILABLE", "RPC_DEADLINE_EXCEEDED")
SUFFIX = {1: ".v1.txt", 2: ".txt", 3: ".bin"}     # as the golden metadata folders name them


def service_errors(fn):
    """One line and the exit code of what the service (or gRPC) answered (EXIT_OF_CODE): 2 not found,
    3 exists, 5 bad version, 6 denied, 7 bad request, 8 unreachable or failed; 16 for usage and 8 for
    any other bkdisk error (one_line_errors)."""

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except BkdiskError as exc:
            # a MetadataError, or an error of the command's own that says which one it follows from
            # (the resolver's "cannot resolve")
            answer = exc if isinstance(exc, metadata_channel.MetadataError) else exc.__cause__
            if not isinstance(answer, metadata_channel.MetadataError):
                raise
            if answer.code in _UNREACHED:
                click.echo(f"bkdisk: cannot reach the metadata service at {kw.get('server', '')}: {exc}", err=True)
                sys.exit(EXIT_UNREACHABLE)
            if answer.code == "PERMISSION_DENIED":
                # the service's own words follow: which token it wants, or what refused the service itself
                why = ("the service refused the token" if kw.get("token") else
                       f"the service needs a token: --token or {token_source.TOKEN_ENV}")
                click.echo(f"bkdisk: {why}: {exc}", err=True)
                sys.exit(EXIT_DENIED)
            click.echo(f"bkdisk: {exc}", err=True)
            sys.exit(EXIT_OF_CODE.get(answer.code, EXIT_UNREACHABLE))
    return one_line_errors(wrapper)


_CLIENT_CERTIFICATE = "bkdisk.client_certificate"


def _keep_client_certificate(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    # Kept beside the command's own parameters (click's ctx.meta), where channel_kw reads it: every
    # client command takes it without naming it in its signature.
    if value is not None:
        ctx.meta.setdefault(_CLIENT_CERTIFICATE, {})[param.name] = value


def client_options(fn):
    """--server, --token, --timeout, --tls-ca (and --tls-cert/--tls-key, a client certificate for
    mutual TLS), --json: what every client command takes."""
    for opt in reversed([
        click.option("--server", default=lambda: os.environ.get("BKDISK_METADATA_SERVER", DEFAULT_SERVER),
                     show_default=DEFAULT_SERVER, metavar="HOST:PORT",
                     help="The metadata service (env BKDISK_METADATA_SERVER)."),
        click.option("--token", default=lambda: os.environ.get(token_source.TOKEN_ENV), callback=checked_token_option,
                     help=f"The service's token, sent with every call (env {token_source.TOKEN_ENV})."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
                     help="Seconds per call."),
        click.option("--tls-ca", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="PEM root certificates: talk TLS to the service."),
        click.option("--tls-cert", type=click.Path(dir_okay=False, exists=True), default=None, expose_value=False,
                     callback=_keep_client_certificate,
                     help="PEM client certificate chain, for a service that requires one (mutual TLS)."),
        click.option("--tls-key", type=click.Path(dir_okay=False, exists=True), default=None, expose_value=False,
                     callback=_keep_client_certificate, help="PEM private key of --tls-cert."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON."),
    ]):
        fn = opt(fn)
    return fn


def _pem(path: str, what: str, marker: bytes = b"-----BEGIN ") -> bytes:
    """A PEM file's bytes; a file that holds no PEM block is said here, naming it (gRPC would only fail
    every connection, said as the service being out of reach)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BkdiskError(f"{path}: cannot read {what} ({e.strerror})") from None
    if marker not in data:
        raise BkdiskError(f"{path}: expected {what} in PEM ('-----BEGIN ...'), found none")
    return data


def channel_kw(token, timeout, tls_ca) -> dict:
    roots = client_certificate = None
    if tls_ca:
        roots = _pem(tls_ca, "the CA certificate (--tls-ca)", b"-----BEGIN CERTIFICATE-----")
    ctx = click.get_current_context(silent=True)
    pair = ctx.meta.get(_CLIENT_CERTIFICATE, {}) if ctx is not None else {}
    if pair:
        if len(pair) != 2:
            raise click.UsageError("--tls-cert and --tls-key go together")
        if not tls_ca:
            raise click.UsageError("--tls-cert and --tls-key need --tls-ca (a client certificate is sent over TLS)")
        client_certificate = (_pem(pair["tls_key"], "the client's key (--tls-key)"),
                              _pem(pair["tls_cert"], "the client's certificate (--tls-cert)",
                                   b"-----BEGIN CERTIFICATE-----"))
    return {"token": token, "timeout": timeout, "retries": 2, "root_certificates": roots,
            "client_certificate": client_certificate}


def closed_with_command(client: T) -> T:
    """``client``, its channel closed when the command ends however it ends: calls still open at
    interpreter exit can leave the process waiting on gRPC's locks after it printed its answer."""
    click.get_current_context().call_on_close(client.close)   # type: ignore[attr-defined]
    return client


def _metadata_client(server, token, timeout, tls_ca):
    return closed_with_command(metadata_client.MetadataClient(metadata_client.service_target(server),
                                                              **channel_kw(token, timeout, tls_ca)))


def _need(ledger, what: str):
    if ledger is None:
        raise click.UsageError(f"{what} needs --ledger-id (or --ledger-qualified-name)")
    return ledger


def answered_first(items: Iterator[T]) -> Iterator[T]:
    """``items`` with its first item already taken from the service: a command that cannot reach it
    fails before printing or making anything."""
    first = list(itertools.islice(items, 1))
    return itertools.chain(first, items)


def _ledger_json(scope: int, lid: int) -> dict:
    return {"ledger_scope_id": scope, "ledger_id": lid, "ledger_qualified_name": LedgerId(scope, lid).qualified_name}


@click.group("metadata", context_settings=HELP_OPTIONS)
def metadata() -> None:
    """The ledger metadata service (BP-16): serve it, read and change ledgers through it."""



metadata.add_command(serve_command)


# ------------------------------------------------------------------------------- client calls
@metadata.command("get", context_settings=HELP_OPTIONS)
@ledger_options
@click.option("--format-version", type=click.IntRange(0, 3), default=0,
              help="Serialize as format 1, 2 or 3 (0: as stored).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the serialized metadata to this file.")
@client_options
@service_errors
def get_command(ledger, format_version, out_file, server, token, timeout, tls_ca, as_json) -> None:
    """One ledger's metadata and version."""
    ledger = _need(ledger, "get")
    c = _metadata_client(server, token, timeout, tls_ca)
    got = c.read(ledger.ledger, ledger.scope, format_version)
    md = metadata_format.parse_metadata(got.serialized, path=f"{server}: ledger {ledger.qualified_name}")
    if out_file:
        with private_file(out_file) as f:   # (its password)
            f.write(got.serialized)
    doc = {**_ledger_json(got.scope, got.ledger_id), "version": got.version, "metadata": md.to_json()}
    ens = "; ".join(f"{first}: {','.join(m)}" for first, m in md.ensembles)
    emit(doc, as_json, f"ledger {got.ledger_id} (scope {got.scope}) version {got.version}: {md.state}, "
                        f"E/Qw/Qa {md.ensemble_size}/{md.write_quorum}/{md.ack_quorum}, "
                        f"digest {md.digest_type}, length {md.length}, last entry {md.last_entry_id}, "
                        f"ensembles {ens}")


@metadata.command("list", context_settings=HELP_OPTIONS)
@click.option("--ledger-scope-id", "scope", default=None, help="Only this scope (default: every scope).")
@click.option("--page-size", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@client_options
@service_errors
def list_command(scope, page_size, server, token, timeout, tls_ca, as_json) -> None:
    """Every ledger (scope 0 first, then the other scopes), ascending: a header line, then scope and
    ledger id in decimal (as BookKeeper's shell prints them and every command reads them) and the
    32-hex-digit qualified name, tab-separated; or --json. Nothing is printed before the service
    answers."""
    s = None if scope is None else parse_id(scope, "--ledger-scope-id")
    c = _metadata_client(server, token, timeout, tls_ca)
    keys = c.iterate(all_scopes=True, limit_per_response=page_size) if s is None else \
        c.iterate(scope=s, limit_per_response=page_size)
    keys = answered_first(keys)
    if as_json:
        click.echo(json.dumps([_ledger_json(a, b) for a, b in keys]))
    else:
        click.echo("scope\tledger\tqualified_name")
        for a, b in keys:
            click.echo(f"{a}\t{b}\t{LedgerId(a, b).qualified_name}")


@metadata.command("create", context_settings=HELP_OPTIONS)
@ledger_options
@click.option("--from", "source", required=True, type=click.Path(dir_okay=False),
              help="A serialized metadata file (format 1, 2 or 3), stored as it is.")
@click.option("--in-scope", "in_scope", default=None,
              help="Scope for a generated id (when no --ledger-id is given).")
@client_options
@service_errors
def create_command(ledger, source, in_scope, server, token, timeout, tls_ca, as_json) -> None:
    """Create a ledger; without --ledger-id the service generates the id."""
    data = mapped.read_bytes(source)
    metadata_format.parse_metadata(data, path=source)   # not metadata: one line naming the file and offset
    scope = ledger.scope if ledger is not None else (parse_id(in_scope, "--in-scope") if in_scope else 0)
    c = _metadata_client(server, token, timeout, tls_ca)
    got = c.create(data, scope=scope, ledger_id=None if ledger is None else ledger.ledger)
    emit({**_ledger_json(got.scope, got.ledger_id), "version": got.version}, as_json,
          f"created ledger {got.ledger_id} (scope {got.scope}) version {got.version}")


@metadata.command("delete", context_settings=HELP_OPTIONS)
@ledger_options
@click.option("--expected-version", type=click.IntRange(min=0), default=None,
              help="Delete only if the metadata is still at this version.")
@client_options
@service_errors
def delete_command(ledger, expected_version, server, token, timeout, tls_ca, as_json) -> None:
    """Delete one ledger's metadata."""
    ledger = _need(ledger, "delete")
    c = _metadata_client(server, token, timeout, tls_ca)
    c.remove(ledger.ledger, ledger.scope, expected_version)
    emit({**_ledger_json(*ledger), "deleted": True}, as_json, f"deleted ledger {ledger.ledger} (scope {ledger.scope})")


@metadata.command("watch", context_settings=HELP_OPTIONS)
@ledger_options
@click.option("--after-sequence", type=click.IntRange(min=0), default=None,
              help="Replay every change after this change-log sequence first (0: from the start kept).")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many changes.")
@client_options
@service_errors
def watch_command(ledger, after_sequence, count, server, token, timeout, tls_ca, as_json) -> None:
    """Print each create, update and delete (of one ledger, or of all), one line each, in order."""
    c = _metadata_client(server, token, timeout, tls_ca)
    stream = c.watch([tuple(ledger)] if ledger is not None else [], watch_all=ledger is None,
                     after_sequence=after_sequence,
                     on_lost=lambda why: print(f"bkdisk metadata: watch: the stream to {server} was lost ({why}); "
                                               "reopening it until the service answers", file=sys.stderr, flush=True))
    seen = 0
    for ch in stream:
        doc = {**_ledger_json(ch.scope, ch.ledger_id), "change": ch.change, "sequence": ch.sequence,
               "version": ch.version}
        emit(doc, as_json, f"{ch.sequence}\t{ch.change}\t{ch.scope}\t{ch.ledger_id}\tversion {ch.version}")
        sys.stdout.flush()
        seen += 1
        if count is not None and seen >= count:
            break
    c.close()


@metadata.command("import", context_settings=HELP_OPTIONS)
@click.argument("folder", type=click.Path(file_okay=False, exists=True))
@click.option("--skip-existing", "existing", flag_value="skip",
              help="Leave a ledger that already exists as it is (and go on).")
@click.option("--overwrite", "existing", flag_value="overwrite",
              help="Replace a ledger that already exists with other metadata: a write at the version read "
                   "(compare-and-set); one holding the file's bytes already is left unchanged.")
@client_options
@service_errors
def import_command(folder, existing, server, token, timeout, tls_ca, as_json) -> None:
    """Create every ledger of a metadata folder (`<hex id>.bin`, `.txt`, `.v1.txt`; a 32-digit name
    is a scoped ledger), its bytes stored as they are. One file per ledger: .bin first. Every file
    is read and checked before any ledger is created; then the bytes checked go 1000 at a time
    (CreateMany), create-only, in ledger id order, from a spool in the temporary folder (TMPDIR,
    about the folder's size; without room there the folder is read again). A ledger that exists
    already stops the import unless --skip-existing or --overwrite says otherwise. The folder is
    streamed, never held: a million ledgers take tens of MiB."""
    progress = progress_line if sys.stderr.isatty() else None
    c = _metadata_client(server, token, timeout, tls_ca)
    got = folder_import.import_folder(c, folder, existing, progress)
    if progress is not None:
        progress(f"imported {got.count('imported')} of {got.checked} ledgers", True)
    n = {k: got.count(k) for k in folder_import.OUTCOMES}
    extra = (f", {n['skipped']} skipped (they exist)" if n["skipped"] else "") + \
        (f", {n['overwritten']} overwritten" if n["overwritten"] else "") + \
        (f", {n['unchanged']} unchanged (they hold these bytes)" if n["unchanged"] else "")
    if not as_json:
        click.echo(f"imported {n['imported']} ledgers from {folder}{extra}")
        return
    # emit()'s document (keys sorted), written a ledger at a time: the lists are never built whole
    w = sys.stdout.write
    w(f'{{"imported": {n["imported"]}')
    for key, outcome in (("ledgers", "imported"), ("overwritten", "overwritten"), ("skipped", "skipped"),
                         ("unchanged", "unchanged")):
        w(f', "{key}": [')
        for i, lid in enumerate(got.ledgers(outcome)):
            w((", " if i else "") + json.dumps(_ledger_json(*lid), sort_keys=True))
        w("]")
    w("}\n")


@metadata.command("export", context_settings=HELP_OPTIONS)
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["1", "2", "3", "stored"]), default="3", show_default=True,
              help="Format of each file: 3 `<hex id>.bin`, 2 `.txt`, 1 `.v1.txt`, or as stored.")
@click.option("--ledger-scope-id", "scope", default=None, help="Only this scope (default: every scope).")
@client_options
@service_errors
def export_command(folder, fmt, scope, server, token, timeout, tls_ca, as_json) -> None:
    """Write every ledger's metadata into FOLDER, one file per ledger (scoped ledgers by their
    32-digit qualified name)."""
    c = _metadata_client(server, token, timeout, tls_ca)
    want = 0 if fmt == "stored" else int(fmt)
    s = None if scope is None else parse_id(scope, "--ledger-scope-id")
    pages = answered_first(c.read_ledgers(scope=s, format_version=want))
    os.makedirs(folder, mode=0o700, exist_ok=True)   # (every ledger's password: the owner's alone, made so)
    written = []
    for page in pages:
        for got in page:
            name = f"{got.ledger_id:x}" if got.scope == 0 else got.key.qualified_name
            version = want or metadata_format.parse_metadata(got.serialized, path=f"ledger {name}").format_version
            path = os.path.join(folder, name + SUFFIX[version])
            with private_file(path + ".tmp") as f:
                f.write(got.serialized)
            os.replace(path + ".tmp", path)
            written.append(os.path.basename(path))
    emit({"exported": len(written), "files": written}, as_json, f"exported {len(written)} ledgers to {folder}")
