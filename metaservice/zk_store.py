"""The ZooKeeper metadata store (kazoo) over BookKeeper's own znode layout; see specs/metadata-store.md.

Ledger znodes, LAYOUT, INSTANCEID, available/, cookies/ and the idgen generator are BookKeeper's; the
znode version is the metadata version and the znode data is the LedgerMetadataSerDe bytes as given.
bkdisk adds one thing, the change log under <root>/bkdisk: a counter znode whose version is the
newest sequence, and one znode per change (changes/%020d). Every mutation is ONE ZooKeeper multi:
[ledger op, CAS on the counter, create of the change znode]; so the ledger and its change apply
together or not at all, and the change znode (carrying a random token) tells afterwards whether a
multi whose reply was lost did apply: it is never sent twice blindly.
"""
from __future__ import annotations

import itertools
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterator

from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss, NodeExistsError,
                              NoNodeError, NotEmptyError, OperationTimeoutError, SessionExpiredError)

from metaservice import zk_layout as L
from metaservice.store import (SCOPE0_MAX_LEDGER, BadVersion, Change, LedgerExists, LedgerNotFound,
                               MetadataStore, StoreError, StoreUnavailable, Versioned, check_ids,
                               scoped_ledger_candidate)

log = logging.getLogger(__name__)
_DOWN = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError,
         KazooTimeoutError)
_ID_ATTEMPTS = 64
_RESOLVE_SECONDS = 60.0      # how long a write whose reply was lost waits for ZooKeeper to come back


class ZkStore(MetadataStore):
    """``hosts`` is 'host:port[,host:port]'; ``root`` the ledgers root path (BookKeeper's zkLedgersRootPath)."""

    def __init__(self, hosts: str, root: str = "/ledgers", session_timeout: float = 10.0,
                 retain_changes: int = 100_000, connect_timeout: float = 15.0):
        super().__init__()
        self.hosts, self.root = hosts, "/" + root.strip("/")
        self.retain_changes = retain_changes
        self.counter = f"{self.root}/{L.BKDISK_NODE}/changelog"
        self.changes = f"{self.root}/{L.BKDISK_NODE}/changes"
        self._lock = threading.Lock()           # one mutation multi at a time from this service
        self._up = threading.Event()
        self._session_listeners: list = []
        self._session: int | None = None
        self.interruptions = 0                   # SUSPENDED or LOST states seen (for tests and logs)
        self.zk = KazooClient(hosts=hosts, timeout=session_timeout,
                              connection_retry={"max_tries": -1, "max_delay": 1.0})
        self.zk.add_listener(self._state)
        try:
            self.zk.start(timeout=connect_timeout)
        except Exception as exc:   # noqa: BLE001 - kazoo raises its own timeout type
            self.zk.close()
            raise StoreError(f"zk://{hosts}{self.root}: cannot reach ZooKeeper: {exc}") from None
        self._up.set()
        self._session = self.zk.client_id[0] if self.zk.client_id else None
        self.kind = self._init_layout()
        self._head = self._read_head()

    # --- session ---
    def _state(self, state: str) -> None:
        """kazoo's connection listener (runs on kazoo's thread: never block here)."""
        if state == KazooState.CONNECTED:
            self._up.set()
            self.zk.handler.spawn(self._reconnected)
        else:   # SUSPENDED (may come back with the same session) or LOST (session expired)
            self._up.clear()
            self.interruptions += 1
            log.warning("ZooKeeper session %s: %s", self.hosts, state)

    def _reconnected(self) -> None:
        sid = self.zk.client_id[0] if self.zk.client_id else None
        renewed = sid != self._session
        self._session = sid
        for fn in list(self._session_listeners):
            try:
                fn(renewed)
            except Exception:   # noqa: BLE001 - one listener must not stop the others
                log.exception("session listener failed")
        self._notify()

    def on_session(self, fn) -> None:
        """Call ``fn(new_session: bool)`` after every reconnection (ephemeral owners re-create)."""
        self._session_listeners.append(fn)

    def _ready(self) -> None:
        if not self._up.is_set():
            raise StoreUnavailable(f"zk://{self.hosts}{self.root}: ZooKeeper session is down; retry")

    def _call(self, fn, *args, **kw):
        self._ready()
        try:
            return fn(*args, **kw)
        except _DOWN as exc:
            raise StoreUnavailable(f"zk://{self.hosts}{self.root}: {type(exc).__name__}; retry") from None

    # --- layout ---
    def _init_layout(self) -> str:
        """Adopt an existing cluster's LAYOUT, or lay out a new one as BookKeeper's initNewCluster does."""
        zk, r = self.zk, self.root
        zk.ensure_path(r)
        for node in ("available/readonly", "cookies", L.BKDISK_NODE + "/changes"):
            zk.ensure_path(f"{r}/{node}")
        for node, data in (("LAYOUT", L.layout_bytes()), ("INSTANCEID", str(uuid.uuid4()).encode()),
                           (L.BKDISK_NODE + "/changelog", b"")):
            try:
                zk.create(f"{r}/{node}", data)
            except NodeExistsError:
                pass
        data, _ = zk.get(f"{r}/LAYOUT")
        try:
            return L.parse_layout(data, f"zk://{self.hosts}{r}/LAYOUT")
        except ValueError as exc:
            raise StoreError(str(exc)) from None

    def instance_id(self) -> str:
        return self._call(self.zk.get, f"{self.root}/INSTANCEID")[0].decode()

    def path(self, scope: int, ledger: int) -> str:
        return L.ledger_path(self.root, self.kind, scope, ledger)

    # --- change log ---
    def _read_head(self) -> int:
        stat = self._call(self.zk.exists, self.counter)
        if stat is None:
            raise StoreError(f"zk://{self.hosts}{self.counter} is missing")
        return stat.version

    def head_sequence(self) -> int:
        try:
            self._head = max(self._head, self._read_head())
        except StoreUnavailable:
            pass
        return self._head

    def wait_for_change(self, sequence: int, timeout: float) -> bool:
        # Writes of this service notify at once; other writers are seen by polling the counter.
        with self._changed:
            if self._changed.wait_for(lambda: self._head > sequence, timeout):
                return True
        return self.head_sequence() > sequence

    def changes_since(self, sequence: int, limit: int = 1000) -> list[Change]:
        head = self._read_head()
        self._head = max(self._head, head)
        last = min(head, sequence + limit)
        self._ready()
        pending = [(s, self.zk.get_async(f"{self.changes}/{s:020d}")) for s in range(sequence + 1, last + 1)]
        out = []
        for s, res in pending:
            try:
                data, _ = res.get(timeout=30)
            except NoNodeError:
                if out:        # pruned only from the oldest end: a gap after a hit cannot be
                    break
                raise BadVersion(f"change {s} was pruned; cannot resume after {sequence}") from None
            except _DOWN as exc:
                raise StoreUnavailable(f"zk://{self.hosts}: {type(exc).__name__}; retry") from None
            out.append(_decode_change(s, data))
        return out

    def read_with_head(self, scope: int, ledger: int) -> tuple[Versioned | None, int]:
        check_ids(scope, ledger)
        while True:   # the head before and after the read agree: one consistent snapshot
            before = self._read_head()
            try:
                got = self.read(scope, ledger)
            except LedgerNotFound:
                got = None
            if self._read_head() == before:
                return got, before

    def _mutate(self, ops, change: str, scope: int, ledger: int, version: int,
                data: bytes | None) -> None:
        """Apply ``ops(transaction)`` plus the change-log entry as one multi; raise on refusal."""
        with self._lock:
            for _ in range(1000):
                head = self._read_head()
                token = secrets.token_hex(8)
                record = _encode_change(token, change, scope, ledger, version, data)
                tx = self.zk.transaction()
                ops(tx)
                tx.set_data(self.counter, b"", version=head)
                tx.create(f"{self.changes}/{head + 1:020d}", record)
                results = self._commit(tx, head + 1, token)
                if results is None:       # applied (as its change entry shows when the reply was lost)
                    break
                if results == "again":    # verified not applied: sending it again is safe
                    continue
                first = next(r for r in results if isinstance(r, Exception)
                             and type(r).__name__ not in ("RolledBackError", "RuntimeInconsistency"))
                if results.index(first) == 0:
                    raise first           # the ledger op was refused: the caller maps it
                # another writer moved the change log under us: read the head again
            else:
                raise StoreError("the change log kept moving; gave up after 1000 attempts")
            self._head = head + 1
            self._prune(head + 1)
        self._notify()

    def _commit(self, tx, sequence: int, token: str):
        """Commit ``tx``; None when it applied. A lost reply is resolved by reading the change entry
        back once ZooKeeper answers again, so the multi is never applied twice."""
        self._ready()
        try:
            results = tx.commit()
        except _DOWN:
            return self._resolve(sequence, token)
        return results if any(isinstance(r, Exception) for r in results) else None

    def _resolve(self, sequence: int, token: str):
        deadline = time.monotonic() + _RESOLVE_SECONDS
        while time.monotonic() < deadline:
            if not self._up.wait(0.5):
                continue
            try:
                self.zk.sync(self.changes)
                data, _ = self.zk.get(f"{self.changes}/{sequence:020d}")
            except NoNodeError:
                return "again"
            except _DOWN:
                continue
            return None if data.split(b" ", 1)[0].decode() == token else "again"
        raise StoreError(f"zk://{self.hosts}: ZooKeeper did not come back within {_RESOLVE_SECONDS}s; "
                         "the outcome of this write is unknown: read the ledger before retrying")

    def _prune(self, sequence: int) -> None:
        """Every ``step`` changes, delete the entries older than the newest ``retain_changes``,
        oldest first (changes_since reads a gap at the front as 'pruned')."""
        step = min(1000, max(1, self.retain_changes // 10))
        if sequence % step or sequence <= self.retain_changes:
            return
        cut = sequence - self.retain_changes
        for s in range(max(1, cut - step + 1), cut + 1):
            self.zk.delete_async(f"{self.changes}/{s:020d}")

    # --- ledgers ---
    def create(self, scope: int, ledger: int | None, data: bytes) -> Versioned:
        check_ids(scope, ledger)
        for _ in range(_ID_ATTEMPTS):
            lid = ledger if ledger is not None else self._generate(scope)
            path = self.path(scope, lid)
            self._call(self.zk.ensure_path, path.rsplit("/", 1)[0])
            try:
                self._mutate(lambda tx: tx.create(path, data), "CREATED", scope, lid, 0, data)
                return Versioned(scope, lid, 0, data)
            except NodeExistsError:
                if ledger is not None:
                    raise LedgerExists(f"ledger {lid} of scope {scope} already exists") from None
            except NoNodeError:   # a parent was removed between ensure_path and the multi
                continue
        raise StoreError(f"no free ledger id in scope {scope} after {_ID_ATTEMPTS} tries")

    def _generate(self, scope: int) -> int:
        if scope:
            return scoped_ledger_candidate()
        # BookKeeper's LongZkLedgerIdGenerator: an ephemeral sequential idgen/ID-<n> gives n, then goes.
        base = f"{self.root}/idgen"
        self._call(self.zk.ensure_path, base)
        node = self._call(self.zk.create, f"{base}/ID-", b"", ephemeral=True, sequence=True)
        self._call(self.zk.delete, node)
        lid = int(node.rsplit("ID-", 1)[1])
        if lid >= L.JAVA_INT_MAX or lid < 0:
            lid = self._generate_long()
        return lid

    def _generate_long(self) -> int:
        base = f"{self.root}/idgen-long"
        self._call(self.zk.ensure_path, base)
        hobs = sorted(n for n in self._call(self.zk.get_children, base) if n.startswith("HOB-"))
        high = int(hobs[-1][4:]) if hobs else 1
        while True:
            hob = f"{base}/HOB-{high:010d}"
            self._call(self.zk.ensure_path, hob)
            node = self._call(self.zk.create, f"{hob}/ID-", b"", ephemeral=True, sequence=True)
            self._call(self.zk.delete, node)
            low = int(node.rsplit("ID-", 1)[1])
            if 0 <= low < L.JAVA_INT_MAX:
                lid = (high << 32) | low
                if lid > SCOPE0_MAX_LEDGER:
                    raise StoreError("scope 0 ledger ids are exhausted")
                return lid
            high += 1

    def read(self, scope: int, ledger: int) -> Versioned:
        check_ids(scope, ledger)
        try:
            data, stat = self._call(self.zk.get, self.path(scope, ledger))
        except NoNodeError:
            raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist") from None
        return Versioned(scope, ledger, stat.version, data)

    def write(self, scope: int, ledger: int, data: bytes, expected_version: int) -> Versioned:
        check_ids(scope, ledger)
        if not 0 <= expected_version < L.JAVA_INT_MAX:   # ZooKeeper reads -1 as "any version"
            self.read(scope, ledger)
            raise BadVersion(f"ledger {ledger} of scope {scope}: version {expected_version} cannot match")
        path = self.path(scope, ledger)
        try:
            self._mutate(lambda tx: tx.set_data(path, data, version=expected_version), "UPDATED",
                         scope, ledger, expected_version + 1, data)
        except NoNodeError:
            raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist") from None
        except BadVersionError:
            raise BadVersion(f"ledger {ledger} of scope {scope} is not at version {expected_version}") from None
        return Versioned(scope, ledger, expected_version + 1, data)

    def remove(self, scope: int, ledger: int, expected_version: int | None) -> None:
        check_ids(scope, ledger)
        path = self.path(scope, ledger)
        if expected_version is None:
            current = self.read(scope, ledger).version   # the change entry records what was deleted
        else:
            current = expected_version
        if not 0 <= current < L.JAVA_INT_MAX:
            raise BadVersion(f"ledger {ledger} of scope {scope}: version {current} cannot match")
        try:
            self._mutate(lambda tx: tx.delete(path, version=current), "DELETED", scope, ledger,
                         current, None)
        except NoNodeError:
            raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist") from None
        except BadVersionError:
            if expected_version is None:   # changed between our read and the delete: read again
                return self.remove(scope, ledger, None)
            raise BadVersion(f"ledger {ledger} of scope {scope} is not at version {expected_version}") from None
        except NotEmptyError:
            raise StoreError(f"{path} has children; it is not a ledger znode") from None

    def _children(self, path: str) -> list[str]:
        try:
            return self._call(self.zk.get_children, path)
        except NoNodeError:
            return []

    def ledger_ids(self, scope: int, after: int | None, limit: int) -> list[int]:
        check_ids(scope, None)
        if scope:
            walk = L.SCOPED.walk(f"{self.root}/{L.SCOPES_NODE}/{scope:016x}", self._children, after)
        else:
            walk = L.scope0_walk(self.root, self.kind, self._children, after)
        out = []
        for lid in walk:
            out.append(lid)
            if len(out) >= limit:
                break
        return out

    def _keys(self, start: tuple[int, int] | None,
              end: tuple[int, int] | None) -> Iterator[tuple[int, int]]:
        """(scope, ledger) of every ledger znode in [start, end), ascending, from listings only."""
        s0, l0 = start or (0, 0)
        names = self._children(f"{self.root}/{L.SCOPES_NODE}")
        scoped = sorted(int(n, 16) for n in names if L.SCOPED_SCOPE.fullmatch(n))
        for scope in ([0] if s0 == 0 else []) + [x for x in scoped if x and x >= s0]:
            if end is not None and scope > end[0]:
                return
            after = l0 - 1 if scope == s0 and l0 > 0 else None
            if scope:
                walk = L.SCOPED.walk(f"{self.root}/{L.SCOPES_NODE}/{scope:016x}", self._children, after)
            else:
                walk = L.scope0_walk(self.root, self.kind, self._children, after)
            for lid in walk:
                if end is not None and (scope, lid) >= end:
                    return
                yield scope, lid

    def scan(self, start: tuple[int, int] | None, end: tuple[int, int] | None,
             batch: int) -> Iterator[list[Versioned]]:
        # Reads go out a batch ahead of the one being answered: ZooKeeper answers in order on
        # one session, so a pipelined batch costs one round trip, not one per ledger.
        keys = self._keys(start, end)

        def send():
            chunk = list(itertools.islice(keys, batch))
            self._ready()
            return [(k, self.zk.get_async(self.path(*k))) for k in chunk]

        pending = send()
        while pending:
            ahead = send()
            out = []
            for (scope, lid), res in pending:
                try:
                    data, stat = res.get(timeout=60)
                except NoNodeError:          # deleted since the listing: not a ledger any more
                    continue
                except _DOWN as exc:
                    raise StoreUnavailable(f"zk://{self.hosts}{self.root}: {type(exc).__name__}; "
                                           "retry") from None
                out.append(Versioned(scope, lid, stat.version, data))
            if out:
                yield out
            pending = ahead

    def scopes(self) -> list[int]:
        names = self._children(f"{self.root}/{L.SCOPES_NODE}")
        found = sorted(int(n, 16) for n in names if L.SCOPED_SCOPE.fullmatch(n))
        has0 = bool(self.ledger_ids(0, None, 1))
        return ([0] if has0 else []) + [s for s in found if s and self.ledger_ids(s, None, 1)]

    def new_registry(self):
        """Bookie registrations kept as ephemeral znodes under available/ (BookKeeper's layout)."""
        from metaservice.zk_registry import ZkRegistry
        return ZkRegistry(self)

    def close(self) -> None:
        self._session_listeners.clear()
        try:
            self.zk.stop()
        finally:
            self.zk.close()


def _encode_change(token: str, change: str, scope: int, ledger: int, version: int,
                   data: bytes | None) -> bytes:
    flag = "-" if data is None else "+"
    return f"{token} {change} {scope} {ledger} {version} {flag}\n".encode() + (data or b"")


def _decode_change(sequence: int, raw: bytes) -> Change:
    head, _, data = raw.partition(b"\n")
    _token, change, scope, ledger, version, flag = head.decode().split(" ")
    return Change(sequence, int(scope), int(ledger), change, int(version),
                  None if flag == "-" else bytes(data))


def from_url(url: str, **kw) -> ZkStore:
    """A ZkStore from ``zk://HOST:PORT[,HOST:PORT...][/root]`` (root defaults to /ledgers)."""
    if not url.startswith("zk://"):
        raise StoreError(f"{url}: not a ZooKeeper store URL (expected zk://HOST:PORT/ledgers)")
    hosts, _, root = url[len("zk://"):].partition("/")
    for hp in hosts.split(","):
        host, sep, port = hp.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StoreError(f"{url}: {hp!r} is not HOST:PORT (expected zk://HOST:PORT/ledgers)")
    return ZkStore(hosts, "/" + (root.strip("/") or "ledgers"), **kw)
