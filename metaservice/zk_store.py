"""The ZooKeeper metadata store (kazoo) over BookKeeper's own znode layout; see specs/metadata-store.md.

Ledger znodes, LAYOUT, INSTANCEID, available/, cookies/ and the idgen generator are BookKeeper's, and
nothing else is written: the znode version is the metadata version and the znode data is the
LedgerMetadataSerDe bytes as given. Every mutation is ONE ZooKeeper operation (create, setData or
delete at the expected version), as BookKeeper's ledger manager writes. Changes are learnt from
ZooKeeper's own watches (metaservice/zk_watch.py), whoever made them; reads are served from the
cache those watches keep coherent, or from ZooKeeper after a sync when asked to be consistent.

Given credentials (metaservice/zk_auth.py), the session authenticates as the bookies do and every
znode it creates is CREATOR_ALL, as BookKeeper's with zkEnableSecurity; ZooKeeper refusing the
service's identity is PermissionDenied, never a retry.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator

from kazoo import exceptions as kx
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import KeeperState

from bkdisk.metaservice import zk_layout as L
from bkdisk.metaservice.store import (
    BadVersion,
    Change,
    LedgerExists,
    LedgerNotFound,
    MetadataStore,
    PermissionDenied,
    StoreError,
    StoreUnavailable,
    Versioned,
    check_ids,
)
from bkdisk.metaservice.zk_auth import DENIED, ZkCredentials, acl_checked, refusal, sasl_refusal_ends_login
from bkdisk.metaservice.zk_creates import KnownParents, create_many
from bkdisk.metaservice.zk_down import DOWN
from bkdisk.metaservice.zk_ids import generate_id
from bkdisk.metaservice.zk_scan import scan, scope_walk
from bkdisk.metaservice.zk_start import first_layout, start_session
from bkdisk.metaservice.zk_watch import ABSENT, DEFAULT_CACHE, Follower, Seen
from bkdisk.metaservice.zk_writes import write_check, write_error, write_many

log = logging.getLogger(__name__)
_ID_ATTEMPTS = 64
_RESOLVE_SECONDS = 60.0      # how long a write whose reply was lost waits for ZooKeeper to come back


class _StartingQuiet(logging.LoggerAdapter):
    """kazoo's logger for one store, silent until the store has started: a start that fails is one
    error of the store's own (a refused login, an unreachable ZooKeeper), not kazoo's reconnection
    chatter before it."""

    quiet = True

    def isEnabledFor(self, level: int) -> bool:
        return not self.quiet and self.logger.isEnabledFor(level)


class ZkStore(MetadataStore):
    """``hosts`` is 'host:port[,host:port]'; ``root`` the ledgers root path (BookKeeper's zkLedgersRootPath);
    ``auth``: the identity to connect with (None: none, and znodes created open to all, OPEN_ACL_UNSAFE)."""

    def __init__(self, hosts: str, root: str = "/ledgers", session_timeout: float = 10.0,
                 retain_changes: int = 100_000, connect_timeout: float = 15.0,
                 cache_size: int = DEFAULT_CACHE, recursive_watch: bool = True,
                 multi_writes: bool = True, auth: ZkCredentials | None = None):
        super().__init__()
        self.hosts, self.root = hosts, "/" + root.strip("/")
        self.auth = auth
        self.auth_failed = False                 # ZooKeeper refused the SASL login: no retry helps
        self.retain_changes = retain_changes
        self.multi_writes = multi_writes         # a write batch tried as one multi first (zk_writes.py)
        self.known_parents = KnownParents()      # parent znodes a create batch need not make (zk_creates.py)
        self._up = threading.Event()
        self._session_listeners: list = []
        self._session: int | None = None
        self.interruptions = 0                   # SUSPENDED or LOST states seen (for tests and logs)
        self._kazoo_log = _StartingQuiet(logging.getLogger("kazoo.client"), {})
        self.zk = KazooClient(hosts=hosts, timeout=session_timeout, logger=self._kazoo_log,
                              connection_retry={"max_tries": -1, "max_delay": 1.0},
                              **(auth.kazoo_options() if auth is not None else {}))
        self.zk.add_listener(self._state)
        if auth is not None and auth.sasl is not None:
            sasl_refusal_ends_login(self.zk)
        deadline = start_session(self, connect_timeout)
        self._session = self.zk.client_id[0] if self.zk.client_id else None
        self.kind = first_layout(self, deadline)
        self._kazoo_log.quiet = False
        self.follower = Follower(self, retain_changes, cache_size, recursive_watch)
        self.on_session(self.follower.session_back)

    # --- session ---
    def refused(self, exc: Exception) -> PermissionDenied:
        """The error for ZooKeeper refusing this service's identity (``exc``, one of DENIED)."""
        return refusal(f"zk://{self.hosts}{self.root}", self.auth, exc)

    def _state(self, state: str) -> None:
        """kazoo's connection listener (runs on kazoo's thread: never block here)."""
        if state == KazooState.CONNECTED:
            self._up.set()
            self.zk.handler.spawn(self._reconnected)
        else:   # SUSPENDED (may come back with the same session) or LOST (session expired)
            self._up.clear()
            self.interruptions += 1
            if self.zk.client_state == KeeperState.AUTH_FAILED:
                self.auth_failed = True          # kazoo stops reconnecting: calls are refused, not retried
            if not self._kazoo_log.quiet:
                log.warning("ZooKeeper session %s: %s", self.hosts, state)

    def _reconnected(self) -> None:
        sid = self.zk.client_id[0] if self.zk.client_id else None
        renewed = sid != self._session
        self._session = sid
        for fn in list(self._session_listeners):
            try:
                fn(renewed)
            except Exception:   # one listener must not stop the others
                log.exception("session listener failed")
        self._notify()

    def on_session(self, fn) -> None:
        """Call ``fn(new_session: bool)`` after every reconnection (ephemeral owners re-create)."""
        self._session_listeners.append(fn)

    def _ready(self) -> None:
        if self.auth_failed:
            raise self.refused(kx.AuthFailedError())
        if not self._up.is_set():
            raise StoreUnavailable(f"zk://{self.hosts}{self.root}: ZooKeeper session is down; retry")

    def _call(self, fn, *args, **kw):
        self._ready()
        try:
            return fn(*args, **kw)
        except DOWN as exc:
            raise StoreUnavailable(f"zk://{self.hosts}{self.root}: {type(exc).__name__}; retry") from None
        except DENIED as exc:
            raise self.refused(exc) from None

    # --- layout ---
    def instance_id(self) -> str:
        return self._call(self.zk.get, f"{self.root}/INSTANCEID")[0].decode()

    def path(self, scope: int, ledger: int) -> str:
        return L.ledger_path(self.root, self.kind, scope, ledger)

    # --- changes (learnt from ZooKeeper's watches) ---
    def head_sequence(self) -> int:
        return self.follower.head

    def changes_since(self, sequence: int, limit: int = 1000) -> list[Change]:
        return self.follower.changes_since(sequence, limit)

    def wait_for_change(self, sequence: int, timeout: float) -> bool:
        return self.follower.wait(lambda: self.follower.head > sequence, timeout)

    @acl_checked
    def follow(self, scope: int, ledger: int | None) -> None:
        self._ready()
        try:
            if ledger is None:
                self.follower.follow_all()
            else:
                self.follower.follow((scope, ledger))
        except DOWN as exc:
            raise StoreUnavailable(f"zk://{self.hosts}{self.root}: {type(exc).__name__}; retry") from None

    def resumable(self, scope: int, ledger: int | None, sequence: int) -> None:
        self.follower.resumable(None if ledger is None else (scope, ledger), sequence)

    @acl_checked
    def read_with_head(self, scope: int, ledger: int) -> tuple[Versioned | None, int]:
        check_ids(scope, ledger)
        self._ready()
        try:
            return self.follower.read_with_head((scope, ledger))
        except DOWN as exc:
            raise StoreUnavailable(f"zk://{self.hosts}{self.root}: {type(exc).__name__}; retry") from None

    def _write_op(self, key: tuple[int, int], send, check):
        """Send one write; when its reply is lost, decide from the ledger read back once ZooKeeper
        answers again (``check(seen)`` -> result, or None: not applied, send again): a write is
        never applied twice blindly. The state written is reported to the follower, so a watcher
        sees every write made through this service, each version once."""
        try:
            while True:
                self._ready()
                try:
                    got = send()
                except DOWN:
                    got = self._resolve(key, check)
                if got is not None:
                    self.follower.observe(key, got)
                    return got
        finally:
            self.follower.touch(key)

    def _resolve(self, key, check):
        deadline = time.monotonic() + _RESOLVE_SECONDS
        while time.monotonic() < deadline:
            if self.auth_failed:
                raise self.refused(kx.AuthFailedError())
            if not self._up.wait(0.5):
                continue
            try:
                path = self.path(*key)
                self.zk.sync(path)
                try:
                    data, stat = self.zk.get(path)
                    seen = Seen(stat.czxid, stat.version, data)
                except kx.NoNodeError:
                    seen = ABSENT
            except DOWN:
                continue
            return check(seen)
        raise StoreError(f"zk://{self.hosts}: ZooKeeper did not come back within {_RESOLVE_SECONDS}s; "
                         "the outcome of this write is unknown: read the ledger before retrying")

    # --- ledgers ---
    @acl_checked
    def create(self, scope: int, ledger: int | None, data: bytes) -> Versioned:
        check_ids(scope, ledger)
        for _ in range(_ID_ATTEMPTS):
            lid = ledger if ledger is not None else self._generate(scope)
            path = self.path(scope, lid)

            def send(path: str = path) -> Seen:
                try:   # as BookKeeper's createFullPathOptimistic: the parents only when missing
                    _path, stat = self.zk.create(path, data, include_data=True)
                except kx.NoNodeError:
                    self.zk.ensure_path(path.rsplit("/", 1)[0])
                    _path, stat = self.zk.create(path, data, include_data=True)
                return Seen(stat.czxid, 0, data)

            def check(seen):
                if seen.data is None:
                    return None                 # not applied: send again
                if (seen.version, seen.data) == (0, data):
                    return seen                 # the lost reply's create applied
                raise kx.NodeExistsError()

            try:
                self._write_op((scope, lid), send, check)
                return Versioned(scope, lid, 0, data)
            except kx.NodeExistsError:
                if ledger is not None:
                    raise LedgerExists(f"ledger {lid} of scope {scope} already exists") from None
        raise StoreError(f"no free ledger id in scope {scope} after {_ID_ATTEMPTS} tries")

    def _generate(self, scope: int) -> int:
        return generate_id(self, scope)

    @acl_checked
    def read(self, scope: int, ledger: int, consistent: bool = False) -> Versioned:
        """From the watch-coherent cache; ``consistent``: sync with the ZooKeeper leader first and
        read ZooKeeper itself (read-after-write across clients)."""
        check_ids(scope, ledger)
        key = (scope, ledger)
        got = None if consistent else self.follower.cached(key)
        if got is None:
            self._ready()
            try:
                if consistent:
                    self.zk.sync(self.path(scope, ledger))
                got = self.follower.read_through(key)
            except DOWN as exc:
                raise StoreUnavailable(f"zk://{self.hosts}{self.root}: {type(exc).__name__}; retry") from None
        if got.data is None:
            raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist")
        return Versioned(scope, ledger, got.version, got.data)

    @acl_checked
    def write(self, scope: int, ledger: int, data: bytes, expected_version: int) -> Versioned:
        check_ids(scope, ledger)
        if not 0 <= expected_version < L.JAVA_INT_MAX:   # ZooKeeper reads -1 as "any version"
            self.read(scope, ledger)
            raise BadVersion(f"ledger {ledger} of scope {scope}: version {expected_version} cannot match")
        path = self.path(scope, ledger)

        def send():
            stat = self.zk.set(path, data, version=expected_version)
            return Seen(stat.czxid, stat.version, data)

        try:
            self._write_op((scope, ledger), send, write_check(data, expected_version))
        except (kx.NoNodeError, kx.BadVersionError) as exc:
            raise write_error(exc, scope, ledger, expected_version) from None
        return Versioned(scope, ledger, expected_version + 1, data)

    @acl_checked
    def create_many(self, creates: list[tuple[int, int, bytes]]) -> list[Versioned | StoreError]:
        """Every create sent on the session before any reply is awaited (metaservice/zk_creates.py)."""
        return create_many(self, creates)

    @acl_checked
    def write_many(self, writes: list[tuple[int, int, bytes, int]]) -> list[Versioned | StoreError]:
        """Every setData sent on the session before any reply is awaited (metaservice/zk_writes.py)."""
        return write_many(self, writes)

    @acl_checked
    def remove(self, scope: int, ledger: int, expected_version: int | None) -> None:
        check_ids(scope, ledger)
        path = self.path(scope, ledger)
        if expected_version is not None and not 0 <= expected_version < L.JAVA_INT_MAX:
            raise BadVersion(f"ledger {ledger} of scope {scope}: version {expected_version} cannot match")
        want = -1 if expected_version is None else expected_version     # -1: any version, as BookKeeper's Version.ANY

        def check(seen):
            if seen.data is None:
                return ABSENT                   # gone: the lost reply's delete applied
            if want == -1 or seen.version == want:
                return None
            raise kx.BadVersionError()

        def send():
            self.zk.delete(path, version=want)
            return ABSENT

        try:
            self._write_op((scope, ledger), send, check)
        except kx.NoNodeError:
            raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist") from None
        except kx.BadVersionError:
            raise BadVersion(f"ledger {ledger} of scope {scope} is not at version {expected_version}") from None
        except kx.NotEmptyError:
            raise StoreError(f"{path} has children; it is not a ledger znode") from None

    def _children(self, path: str) -> list[str]:
        try:
            return self._call(self.zk.get_children, path)
        except kx.NoNodeError:
            return []

    def ledger_ids(self, scope: int, after: int | None, limit: int) -> list[int]:
        check_ids(scope, None)
        return list(itertools.islice(scope_walk(self, scope, after), limit))

    def scan(self, start: tuple[int, int] | None, end: tuple[int, int] | None,
             batch: int) -> Iterator[list[Versioned]]:
        """Batches of one multiRead each, pipelined (metaservice/zk_scan.py)."""
        return scan(self, start, end, batch)

    def scopes(self) -> list[int]:
        names = self._children(f"{self.root}/{L.SCOPES_NODE}")
        found = sorted(int(n, 16) for n in names if L.SCOPED_SCOPE.fullmatch(n))
        has0 = bool(self.ledger_ids(0, None, 1))
        return ([0] if has0 else []) + [s for s in found if s and self.ledger_ids(s, None, 1)]

    def new_registry(self):
        """Bookie registrations kept as ephemeral znodes under available/ (BookKeeper's layout)."""
        from bkdisk.metaservice.zk_registry import ZkRegistry
        return ZkRegistry(self)

    def close(self) -> None:
        self._session_listeners.clear()
        self.follower.close()
        try:
            self.zk.stop()
        finally:
            self.zk.close()

