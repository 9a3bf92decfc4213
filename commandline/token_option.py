"""The check of a metadata-service token given on a command line or in the environment a client
option reads (``--token``): one that gRPC cannot send is a usage error naming the option, never a
call that fails with the library's words after the command started."""
from __future__ import annotations

import click
from click.core import ParameterSource

from bkdisk.metaservice.token_source import TOKEN_ENV, token_problem


def checked_token_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` when it can be sent; a usage error naming the option, or the environment
    variable its default came from, otherwise (the token itself never quoted)."""
    if value is None or value == "":
        return value or None
    why = token_problem(value)
    if why is None:
        return value
    what = f"expected a token of printable ASCII characters, found {why}"
    if ctx.get_parameter_source(param.name or "") is ParameterSource.DEFAULT:   # the option's default: the env
        raise click.UsageError(f"env {TOKEN_ENV}: {what}", ctx=ctx)
    raise click.BadParameter(what, param=param)
