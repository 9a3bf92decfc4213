"""``bkdisk metadata serve``: the ledger metadata service as an operator starts it, with who may call
it (tokens, TLS, the refusal to be open to the network) and the limits of one caller.

gRPC and kazoo load when the command runs (commandline.lazy): ``--help`` costs click and nothing else.
"""
from __future__ import annotations

import ipaddress
import os
import sys

import click

from bkdisk.commandline.exit_codes import EXIT_USAGE
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.output import HELP_OPTIONS
from bkdisk.commandline.runner import one_line_errors, run_until_stopped
from bkdisk.formats.errors import BkdiskError
from bkdisk.metaservice import store, token_source
from bkdisk.metaservice.limits import Limits

logging = lazy_import("logging")   # only `serve` logs
metadata_server = lazy_import("bkdisk.metaservice.server")
audit_trail = lazy_import("bkdisk.metaservice.audit_trail")
zkauth = lazy_import("bkdisk.metaservice.zk_auth")
store_url = lazy_import("bkdisk.metaservice.store_url")

# SIGTERM: calls in flight get this long to finish, then open streams are cancelled (the whole
# stop must fit in the 5 s a supervisor waits before SIGKILL).
STOP_GRACE_SECONDS = 1.0
STOP_CANCEL_SECONDS = 2.0   # for the calls cancelled after the grace to end


def open_store(url: str, cache_size: int | None = None, credentials=None):
    """The MetadataStore the URL names (metaservice.store_url.open_store); a URL of no known scheme is a
    usage error of --store."""
    try:
        return store_url.open_store(url, cache_size, credentials)
    except store.NotAStoreUrl as e:
        raise click.BadParameter(f"{e.url!r}: expected {store.STORE_URL_FORMS}", param_hint="--store") from None


def zk_credentials(store_url: str, auth: str | None, auth_file: str | None, jaas: str | None):
    """The ZooKeeper store's credentials from --zk-auth (or --zk-auth-file) and --zk-jaas; None when
    neither is given. A malformed --zk-auth is a usage error that never repeats the password."""
    if auth is None and auth_file is None and jaas is None:
        return None
    if not store_url.startswith("zk://"):
        raise click.UsageError("--zk-auth, --zk-auth-file and --zk-jaas apply to a zk:// store only")
    if auth is not None and auth_file is not None:
        raise click.UsageError("--zk-auth and --zk-auth-file: give one of them")
    digest = None
    if auth is not None:
        try:
            digest = zkauth.parse_zk_auth(auth)
        except zkauth.ZkAuthError as e:
            raise click.BadParameter(str(e).removeprefix("--zk-auth: "), param_hint="--zk-auth") from None
    elif auth_file is not None:
        digest = zkauth.read_zk_auth_file(auth_file)
    sasl = zkauth.read_jaas(jaas) if jaas is not None else None
    return zkauth.ZkCredentials(digest=digest, sasl=sasl)


def _bind(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{text!r}: expected HOST:PORT", param_hint="--bind")
    return text


def _loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: reachable from this host only."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _token(value: str | None, path: str | None, option: str) -> str | None:
    if value and path:
        raise click.UsageError(f"give {option} or {option}-file, not both")
    if path:
        return token_source.token_from_file(path)
    try:
        return token_source.checked_token(value or None, option)
    except BkdiskError as e:
        raise click.UsageError(str(e)) from None


def _exposure(host: str, token: str | None, tls: bool, insecure: bool) -> str | None:
    """What a non-loopback bind lacks (a token, TLS), or None when it is safe or told --insecure."""
    if _loopback(host):
        return None
    missing = [what for what, have in (("--token (or --token-file)", token), ("--tls-cert/--tls-key", tls))
               if not have]
    if not missing:
        return None
    what = f"{host} is reachable from other hosts: it needs {' and '.join(missing)}"
    if not insecure:
        raise _Refused(f"bkdisk: refusing to serve on {what}, or --insecure to serve it anyway")
    return f"bkdisk metadata: WARNING: serving on {what} (--insecure)"


class _Refused(Exception):
    """serve will not start as configured: one line, exit 16."""


def security_options(fn):
    """serve's options of who may call it: tokens, TLS, and the refusal to be open to the network."""
    for opt in reversed([
        click.option("--token", default=lambda: os.environ.get(token_source.TOKEN_ENV),
                     help=f"Every call must carry this token (env {token_source.TOKEN_ENV}).", show_default=False),
        click.option("--token-file", type=click.Path(dir_okay=False), default=None,
                     help="Read the token from this file (one line): not on the command line."),
        click.option("--read-token", default=lambda: os.environ.get(token_source.READ_TOKEN_ENV),
                     help="A second token that may only read, and gets every password withheld "
                          f"(env {token_source.READ_TOKEN_ENV}).", show_default=False),
        click.option("--read-token-file", type=click.Path(dir_okay=False), default=None,
                     help="Read the read-only token from this file (one line)."),
        click.option("--tls-cert", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="PEM certificate chain."),
        click.option("--tls-key", type=click.Path(dir_okay=False, exists=True), default=None, help="PEM private key."),
        click.option("--tls-client-ca", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="PEM CA certificates: require a client certificate one of them signed (mutual TLS)."),
        click.option("--insecure", is_flag=True,
                     help="Serve on an address other hosts reach without a token or TLS (warns at start)."),
    ]):
        fn = opt(fn)
    return fn


def limit_options(fn):
    """serve's bounds on what one caller may hold (metaservice.limits)."""
    d = Limits()
    for opt in reversed([
        click.option("--max-request-bytes", type=click.IntRange(min=1024), default=d.max_request_bytes,
                     show_default=True, help="Largest request; larger ones get RESOURCE_EXHAUSTED unread."),
        click.option("--max-batch", type=click.IntRange(1, 100_000), default=d.max_batch, show_default=True,
                     help="Requests per ReadMany/WriteMany."),
        click.option("--max-streams-per-peer", type=click.IntRange(min=1), default=d.streams_per_peer,
                     show_default=True, help="Open streaming calls (watches, listings, registrations) per host."),
        click.option("--max-streams", type=click.IntRange(min=1, max=4096), default=d.streams_total,
                     show_default=True, help="Open streaming calls of all hosts; the service keeps threads "
                                             "beyond them for reads and writes."),
        click.option("--max-watches-per-peer", type=click.IntRange(min=1), default=d.watches_per_peer,
                     show_default=True, help="Ledgers one host's Watch streams follow."),
        click.option("--max-stream-seconds", type=click.FloatRange(min=1), default=d.stream_seconds,
                     show_default=True, help="How long a listing or bulk read may stream (DEADLINE_EXCEEDED after)."),
    ]):
        fn = opt(fn)
    return fn


@click.command("serve", context_settings=HELP_OPTIONS)
@click.option("--store", "store_url", required=True, metavar="URL",
              help="sqlite:PATH (embedded, the default kind) or zk://HOST:PORT/ledgers.")
# A zk:// store's identity, as the bookies of a cluster with zkEnableSecurity have it: either makes
# every znode the service creates CREATOR_ALL (specs/metadata-store.md).
@click.option("--zk-auth", default=lambda: os.environ.get("BKDISK_ZK_AUTH"), metavar="digest:USER:PASSWORD",
              help="Authenticate to ZooKeeper with its digest scheme (env BKDISK_ZK_AUTH).", show_default=False)
@click.option("--zk-auth-file", type=click.Path(dir_okay=False, exists=True), default=None, metavar="FILE",
              help="--zk-auth's digest:USER:PASSWORD read from FILE (one line), off the command line.")
@click.option("--zk-jaas", type=click.Path(dir_okay=False, exists=True), default=None, metavar="FILE",
              help="The bookies' JAAS file: SASL DIGEST-MD5 with the DigestLoginModule of its Client section.")
@click.option("--bind", default="127.0.0.1:4183", show_default=True, metavar="HOST:PORT",
              help="Where to listen (loopback unless told otherwise; port 0 picks a free one).")
@security_options
@limit_options
@click.option("--cache-ledgers", type=click.IntRange(min=0), default=None, metavar="N",
              help="Ledgers whose metadata the ZooKeeper store holds in memory (read or watched), least "
                   "recently used dropped first (0: none) [default: 100000].")
@click.option("-v", "--verbose", is_flag=True, help="One log line per request on stderr.")
@one_line_errors
def serve_command(store_url, zk_auth, zk_auth_file, zk_jaas, bind, token, token_file, read_token, read_token_file,
                  tls_cert, tls_key, tls_client_ca, insecure, max_request_bytes, max_batch, max_streams_per_peer,
                  max_streams, max_watches_per_peer, max_stream_seconds, cache_ledgers, verbose) -> None:
    """Serve LedgerMetadataService and discovery until SIGTERM or Ctrl-C.

    Prints one line `serving STORE on HOST:PORT` once it listens, and one when it stops. Every
    mutation is logged on stderr (the audit trail: caller, token kind, ledger, outcome); with -v,
    one line per request (method, peer, outcome, milliseconds) too. An address other hosts reach
    needs --token and TLS, or --insecure.
    """
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if tls_client_ca and not tls_cert:
        raise click.UsageError("--tls-client-ca needs --tls-cert and --tls-key")
    _bind(bind)
    token = _token(token, token_file, "--token")
    read_token = _token(read_token, read_token_file, "--read-token")
    if read_token and not token:
        raise click.UsageError("--read-token needs --token (the token that may change metadata)")
    if read_token and read_token == token:
        raise click.UsageError("--read-token must differ from --token")
    host = bind.rpartition(":")[0]
    try:
        warning = _exposure(host, token, bool(tls_cert), insecure)
    except _Refused as refused:
        click.echo(str(refused), err=True)
        sys.exit(EXIT_USAGE)
    tls = client_ca = None
    if tls_cert:
        with open(tls_key, "rb") as k, open(tls_cert, "rb") as c:
            tls = (k.read(), c.read())
    if tls_client_ca:
        with open(tls_client_ca, "rb") as f:
            client_ca = f.read()
    credentials = zk_credentials(store_url, zk_auth, zk_auth_file, zk_jaas)
    # Before the store opens: what ZooKeeper's client says while connecting is logged as the rest.
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    audit_trail.enable()   # every mutation one line on stderr, always
    opened = open_store(store_url, cache_ledgers, credentials)
    limits = Limits(max_request_bytes=max_request_bytes, max_batch=max_batch, streams_per_peer=max_streams_per_peer,
                    streams_total=max_streams,
                    watches_per_peer=max_watches_per_peer, stream_seconds=max_stream_seconds)
    server, port = metadata_server.serve(opened, bind=bind, token=token, read_token=read_token, tls=tls,
                                         tls_client_ca=client_ca, limits=limits, log_requests=verbose)
    if warning:
        click.echo(warning, err=True)
    try:
        run_until_stopped(lambda: click.echo(f"bkdisk metadata: serving {store_url} on {host}:{port}"))
    finally:
        # Calls still open after the grace are cancelled; one gRPC never finishes must not keep
        # the process from its stop.
        if not server.stop(STOP_GRACE_SECONDS).wait(STOP_GRACE_SECONDS + STOP_CANCEL_SECONDS):
            click.echo(f"bkdisk metadata: calls still open {STOP_GRACE_SECONDS + STOP_CANCEL_SECONDS:g} s "
                       "after SIGTERM; stopping without them", err=True)
        audit_trail.flush()
        opened.close()
        click.echo(f"bkdisk metadata: stopped serving {store_url} on {host}:{port}")
