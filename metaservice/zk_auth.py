"""The identity the ZooKeeper store connects with, as a secured BookKeeper cluster's bookies do: ZooKeeper's
digest scheme (``digest:USER:PASSWORD``, as ``addauth digest``) and/or SASL DIGEST-MD5 with the
``Client`` section of the bookies' JAAS file; the ACL every znode the store creates then gets
(CREATOR_ALL, as BookKeeper's ZkUtils.getACLs with zkEnableSecurity); and ZooKeeper refusing that
identity as the store's PermissionDenied. See specs/metadata-store.md.

A password is never part of a message, a repr or a log line."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from kazoo import exceptions as kx
from kazoo.security import CREATOR_ALL_ACL

from bkdisk.formats.errors import BkdiskError
from bkdisk.metaservice.store import PermissionDenied

ZK_AUTH_FORM = "digest:USER:PASSWORD"
JAAS_SECTION = "Client"                 # ZooKeeper's client default (zookeeper.sasl.clientconfig)
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")


class ZkAuthError(BkdiskError):
    """Credentials that cannot be used: a malformed --zk-auth, or a JAAS file that cannot be read."""


@dataclass(frozen=True)
class ZkCredentials:
    """``digest`` and ``sasl`` are (user, password) pairs; either or both."""

    digest: tuple[str, str] | None = field(default=None, repr=False)
    sasl: tuple[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.digest is None and self.sasl is None:
            raise ValueError("ZkCredentials needs a digest or a SASL identity")

    def describe(self) -> str:
        """Who the store is to ZooKeeper, for messages: the schemes and users, never a password."""
        out = []
        if self.sasl is not None:
            out.append(f"SASL DIGEST-MD5 user {self.sasl[0]!r}")
        if self.digest is not None:
            out.append(f"digest user {self.digest[0]!r}")
        return " and ".join(out)

    def __repr__(self) -> str:
        return f"ZkCredentials({self.describe()})"

    def kazoo_options(self) -> dict:
        """KazooClient keyword arguments: the identity, and CREATOR_ALL on every znode created (kazoo
        applies ``default_acl`` to create and to the parents ensure_path/makepath make)."""
        out: dict = {"default_acl": CREATOR_ALL_ACL}
        if self.digest is not None:
            out["auth_data"] = [("digest", f"{self.digest[0]}:{self.digest[1]}")]
        if self.sasl is not None:
            # kazoo talks to ZooKeeper's DIGEST-MD5 server as Java's client does: service "zookeeper",
            # server name "zk-sasl-md5".
            out["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": self.sasl[0], "password": self.sasl[1]}
        return out


def sasl_refusal_ends_login(zk) -> None:
    """Make kazoo client ``zk`` treat ZooKeeper refusing its SASL login as a failed login (AUTH_FAILED:
    it stops connecting, and every call waiting or made fails with AuthFailedError), and only that. A
    server that requires SASL (sessionRequireClientSASLAuth) answers a wrong password with
    SessionClosedRequireSasl, which kazoo's connection loop does not expect: its thread would die with
    a traceback, leaving calls to wait for an answer that never comes. A connection dropped during the
    exchange kazoo calls a failed login too; it is the network's doing, so it is a dropped connection
    here, which kazoo connects again after."""
    conn = zk._connection
    real = conn._authenticate_with_sasl

    def authenticate(host, timeout):
        try:
            return real(host, timeout)
        except kx.SessionClosedRequireSaslError:
            raise kx.AuthFailedError("ZooKeeper refused the SASL login") from None
        except kx.AuthFailedError as e:
            if isinstance(e.__cause__, kx.ConnectionDropped):
                raise e.__cause__ from None
            raise
    conn._authenticate_with_sasl = authenticate


def parse_zk_auth(text: str, where: str = "--zk-auth") -> tuple[str, str]:
    """(user, password) of ``digest:USER:PASSWORD`` (the password may hold ':', as ZooKeeper's does)."""
    scheme, _, rest = text.strip().partition(":")
    user, sep, password = rest.partition(":")
    if scheme != "digest" or not sep or not user or not password:
        shown = scheme if scheme and scheme != "digest" else ""
        raise ZkAuthError(f"{where}: expected {ZK_AUTH_FORM}"
                          + (f" (scheme {shown!r} is not supported)" if shown and ":" in text else ""))
    return user, password


def read_zk_auth_file(path: str) -> tuple[str, str]:
    """(user, password) from a file holding ``digest:USER:PASSWORD`` on its one line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ZkAuthError(f"{path}: cannot read the ZooKeeper credentials: "
                          f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    if len(lines) != 1:
        raise ZkAuthError(f"{path}: expected one line {ZK_AUTH_FORM}, found {len(lines)} lines")
    return parse_zk_auth(lines[0], where=path)


# --- the JAAS login configuration file (Java's ConfigFile syntax) ---
_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<line_comment>//[^\n]*) | (?P<block_comment>/\*.*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*") | (?P<word>[A-Za-z0-9_.$\-]+) | (?P<punct>[{};=])
""", re.VERBOSE | re.DOTALL)


@dataclass
class _Tok:
    kind: str
    text: str
    line: int


def _tokens(text: str, path: str) -> list[_Tok]:
    out, at, line = [], 0, 1
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None:
            raise ZkAuthError(f"{path} line {line}: not JAAS login configuration syntax "
                              "(expected a name, a quoted string, '{', '}', ';' or '=')")
        kind, got = m.lastgroup or "", m.group()
        if kind == "string":
            out.append(_Tok("string", re.sub(r"\\(.)", r"\1", got[1:-1]), line))
        elif kind in ("word", "punct"):
            out.append(_Tok(kind, got, line))
        line += got.count("\n")
        at = m.end()
    return out


def _sections(toks: list[_Tok], path: str) -> dict[str, list[tuple[str, str, dict[str, str], int]]]:
    """name -> [(login module class, flag, options, line)], as Java's ConfigFile reads them."""
    out: dict[str, list] = {}
    i = 0

    def take(kind: str, what: str, text: str | None = None) -> _Tok:
        nonlocal i
        if i >= len(toks):
            raise ZkAuthError(f"{path}: the file ends where {what} was expected")
        t = toks[i]
        if t.kind != kind or (text is not None and t.text != text):
            raise ZkAuthError(f"{path} line {t.line}: expected {what}")
        i += 1
        return t

    while i < len(toks):
        name = take("word", "a section name (such as Client)")
        take("punct", f"'{{' after the section name {name.text}", "{")
        modules = out.setdefault(name.text, [])
        while i < len(toks) and toks[i].text != "}":
            module = take("word", "a login module class name")
            flag = take("word", f"a control flag ({', '.join(_FLAGS)}) after {module.text}")
            if flag.text.lower() not in _FLAGS:
                raise ZkAuthError(f"{path} line {flag.line}: expected a control flag ({', '.join(_FLAGS)}) "
                                  f"after {module.text}")
            options: dict[str, str] = {}
            while i < len(toks) and toks[i].text != ";":
                key = take("word", f"an option name or ';' in {module.text}'s entry")
                take("punct", f"'=' after the option {key.text}", "=")
                if i < len(toks) and toks[i].kind in ("string", "word"):
                    options[key.text] = toks[i].text
                    i += 1
                else:
                    take("string", f"a quoted value for the option {key.text}")
            take("punct", f"';' at the end of {module.text}'s entry", ";")
            modules.append((module.text, flag.text.lower(), options, module.line))
        take("punct", f"'}}' closing the section {name.text}", "}")
        take("punct", f"';' after the section {name.text}", ";")
    return out


def read_jaas(path: str, section: str = JAAS_SECTION) -> tuple[str, str]:
    """(username, password) of the DigestLoginModule entry of ``section`` in a JAAS file, as the
    bookies' ZooKeeper client reads it for SASL DIGEST-MD5."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ZkAuthError(f"{path}: cannot read the JAAS file: "
                          f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    sections = _sections(_tokens(text, path), path)
    if section not in sections:
        found = ", ".join(sorted(sections)) or "none"
        raise ZkAuthError(f"{path}: no {section} section (the one ZooKeeper clients read); sections: {found}")
    digest = [m for m in sections[section] if m[0] == DIGEST_MODULE]
    if not digest:
        other = ", ".join(m[0] for m in sections[section]) or "no login module"
        raise ZkAuthError(f"{path}: the {section} section has {other}, not {DIGEST_MODULE} "
                          "(only SASL DIGEST-MD5 is supported)")
    _module, _flag, options, line = digest[0]
    missing = [k for k in ("username", "password") if not options.get(k)]
    if missing:
        raise ZkAuthError(f"{path} line {line}: {DIGEST_MODULE} in {section} needs "
                          f"{' and '.join(missing)}=\"...\"")
    return options["username"], options["password"]


# --- ZooKeeper refusing the identity ---
# kazoo's errors for ZooKeeper refusing a session's identity: an ACL that does not grant it, its SASL
# login refused, or SASL required of it.
DENIED = (kx.NoAuthError, kx.AuthFailedError, kx.SessionClosedRequireSaslError, kx.InvalidACLError)


def refusal(where: str, auth: ZkCredentials | None, exc: Exception) -> PermissionDenied:
    """The one-line error for ZooKeeper refusing the store at ``where`` (``exc``, one of DENIED)."""
    who = auth.describe() if auth is not None else "no credentials (--zk-auth or --zk-jaas gives them)"
    what = {kx.AuthFailedError: "refused the login of this service",
            kx.SessionClosedRequireSaslError: "requires SASL authentication, which this service did not pass",
            kx.InvalidACLError: "refused a CREATOR_ALL ACL: the session is not authenticated"}.get(
                type(exc), "refused this service by the znode's ACL")
    return PermissionDenied(f"{where}: ZooKeeper {what} ({type(exc).__name__}); the service connects with {who}")


def acl_checked(fn):
    """A ZkStore method whose ZooKeeper refusal of the store's identity is PermissionDenied."""
    @functools.wraps(fn)
    def checked(store, *a, **kw):
        try:
            return fn(store, *a, **kw)
        except DENIED as exc:
            raise store.refused(exc) from None
    return checked
