"""``bkdisk bookies``: registered bookies (discovery) and the BookieId resolver (BP-41), through the
metadata service; ``register`` holds a registration for stores with no bookie of their own.

gRPC and protobuf load when a command uses them (commandline.lazy)."""
from __future__ import annotations

import json

import click

from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.output import HELP_OPTIONS, emit
from bkdisk.commandline.runner import run_until_stopped
from bkdisk.metadata_cli import channel_kw, client_options, closed_with_command, service_errors

metadata_client = lazy_import("bkdisk.metaservice.client")
resolver = lazy_import("bkdisk.metaservice.resolver")


@click.group("bookies", context_settings=HELP_OPTIONS)
def bookies() -> None:
    """Registered bookies (discovery) and the BookieId -> address resolver (BP-41)."""


def _discovery(server, token, timeout, tls_ca):
    return closed_with_command(resolver.DiscoveryClient(metadata_client.service_target(server),
                                                        **channel_kw(token, timeout, tls_ca)))


@bookies.command("list", context_settings=HELP_OPTIONS)
@click.option("--read-only", "which", flag_value="read-only", help="Only read-only bookies.")
@click.option("--writable", "which", flag_value="writable", help="Only writable bookies.")
@client_options
@service_errors
def bookies_list(which, server, token, timeout, tls_ca, as_json) -> None:
    """Registered bookies: writable and read-only (or one kind)."""
    d = _discovery(server, token, timeout, tls_ca)
    got = []
    for ro in ([False] if which == "writable" else [True] if which == "read-only" else [False, True]):
        got += d.list(read_only=ro)
    if as_json:
        click.echo(json.dumps([b.to_json() for b in got], sort_keys=True))
    for b in [] if as_json else got:
        eps = ", ".join(f"{i}={h}:{p}" for i, h, p, _pr in b.endpoints)
        click.echo(f"{b.bookie_id}\t{'read-only' if b.read_only else 'writable'}\t{eps}")


def _checked_host(param: click.Parameter, host: str) -> str:
    """A host name or address a client can dial: not empty, printable ASCII without spaces."""
    if not host or not all("!" <= c <= "~" for c in host):
        raise click.BadParameter("expected a host name or address: printable ASCII without spaces, not empty",
                                 param=param)
    return host


@bookies.command("register", context_settings=HELP_OPTIONS)
@click.argument("bookie_id")
@click.option("--host", required=True, callback=lambda _c, p, v: _checked_host(p, v),
              help="The bookie's address for its bookie-rpc endpoint.")
@click.option("--port", type=click.IntRange(1, 65535), required=True)
@click.option("--read-only", is_flag=True, help="Register as read-only.")
@client_options
@service_errors
def bookies_register(bookie_id, host, port, read_only, server, token, timeout, tls_ca, as_json) -> None:
    """Register a bookie (for stores with no bookie of their own) until SIGTERM or Ctrl-C: like a
    bookie's ephemeral registration, it lives while this command runs."""
    d = _discovery(server, token, timeout, tls_ca)
    reg = d.register(bookie_id, resolver.service_info(host, port), read_only=read_only)
    emit({"registered": bookie_id, "read_only": read_only, "host": host, "port": port}, as_json,
          f"registered {bookie_id} ({'read-only' if read_only else 'writable'}) at {host}:{port}; "
          "Ctrl-C or SIGTERM ends the registration")
    try:
        run_until_stopped()
    finally:
        reg.close()
        d.close()
    click.echo(f"unregistered {bookie_id}", err=True)


@bookies.command("info", context_settings=HELP_OPTIONS)
@click.argument("bookie_id")
@client_options
@service_errors
def bookies_info(bookie_id, server, token, timeout, tls_ca, as_json) -> None:
    """One bookie's BookieServiceInfo: endpoints and properties."""
    b = _discovery(server, token, timeout, tls_ca).info(bookie_id)
    lines = [f"{b.bookie_id} ({'read-only' if b.read_only else 'writable'})"]
    lines += [f"  endpoint {i}: {pr}://{h}:{p}" for i, h, p, pr in b.endpoints]
    lines += [f"  {k} = {v}" for k, v in sorted(b.properties.items())]
    emit(b.to_json(), as_json, "\n".join(lines))


@bookies.command("resolve", context_settings=HELP_OPTIONS)
@click.argument("bookie_ids", nargs=-1, required=True)
@click.option("--legacy", is_flag=True, help="Resolver off: a BookieId must itself be host:port.")
@client_options
@service_errors
def bookies_resolve(bookie_ids, legacy, server, token, timeout, tls_ca, as_json) -> None:
    """The network address of each BookieId."""
    r = resolver.BookieAddressResolver(None if legacy else _discovery(server, token, timeout, tls_ca), legacy=legacy)
    try:
        out = {}
        for b in bookie_ids:
            a = r.resolve(b)
            out[b] = f"{a.host}:{a.port}"
    finally:
        r.close()
    emit(out, as_json, "\n".join(f"{k}\t{v}" for k, v in out.items()))
