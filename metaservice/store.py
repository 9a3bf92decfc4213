"""The metadata store interface: versioned compare-and-set over serialized ledger metadata, a change log, id
generation."""
from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.ids import U64

# Scope-0 ledger ids are Java longs that BookKeeper keeps non-negative (its id generators and
# ledger managers never produce or accept a negative id); scoped ledgers use all 64 bits (BP-35).
SCOPE0_MAX_LEDGER = (1 << 63) - 1


class StoreError(BkdiskError):
    """A store outcome other than success, named by its BP-16 status code (see metaservice.proto)."""

    code = "INTERNAL_SERVER_ERROR"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class LedgerExists(StoreError):
    code = "LEDGER_EXISTS"


class LedgerNotFound(StoreError):
    code = "LEDGER_NOT_FOUND"


class BadVersion(StoreError):
    code = "BAD_VERSION"


class StoreUnavailable(StoreError):
    """The store's session is down for now; the call changed nothing and may be retried."""

    code = "STORE_UNAVAILABLE"


class BadRequest(StoreError):
    code = "BAD_REQUEST"


class PermissionDenied(StoreError):
    code = "PERMISSION_DENIED"


# The store URLs store_url.open_store takes.
STORE_URL_FORMS = "sqlite:PATH or zk://HOST:PORT/ledgers"


class NotAStoreUrl(BadRequest):
    """A store URL of no scheme the service knows (a usage error on a command line)."""

    def __init__(self, url: str):
        super().__init__(f"{url}: not a store URL (expected {STORE_URL_FORMS})")
        self.url = url


@dataclass(frozen=True)
class Versioned:
    """One ledger's stored metadata: LedgerMetadataSerDe bytes exactly as written, and its version."""

    scope: int
    ledger: int
    version: int
    data: bytes


@dataclass(frozen=True)
class Change:
    """One entry of the change log; ``data`` is None for a deletion."""

    sequence: int
    scope: int
    ledger: int
    change: str          # CREATED, UPDATED or DELETED
    version: int
    data: bytes | None


def check_ids(scope: int, ledger: int | None) -> None:
    """Raise BadRequest unless ``scope``/``ledger`` are ids this service can store."""
    if not 0 <= scope <= U64:
        raise BadRequest(f"ledger scope id {scope} is outside 0..2^64-1")
    if ledger is None:
        return
    top = SCOPE0_MAX_LEDGER if scope == 0 else U64
    if not 0 <= ledger <= top:
        raise BadRequest(f"ledger id {ledger} is outside 0..{top} for scope {scope}")


def scoped_ledger_candidate() -> int:
    """BP-35's generator for a scoped ledger: the least significant 64 bits of a random UUID."""
    return uuid.uuid4().int & U64


class MetadataStore(ABC):
    """Versioned ledger metadata. Versions start at 0 on create and grow by one per write, as a
    ZooKeeper znode's version does. Every mutation is one atomic step that either applies in full
    and appends its change to the log, or raises and changes nothing."""

    def __init__(self) -> None:
        self._changed = threading.Condition()

    # --- ledgers ---
    @abstractmethod
    def create(self, scope: int, ledger: int | None, data: bytes) -> Versioned:
        """Store a new ledger; ``ledger=None`` generates its id. LedgerExists if taken."""

    @abstractmethod
    def read(self, scope: int, ledger: int, consistent: bool = False) -> Versioned:
        """LedgerNotFound if absent. ``consistent``: reflect every write any client completed before
        the call (a store that serves reads from a cache goes to its source first)."""

    def follow(self, scope: int, ledger: int | None) -> None:  # noqa: B027 - a no-op unless a store overrides it
        """Make sure changes of this ledger (None: of every ledger) reach the change log; a store
        whose log records every mutation anyway does nothing."""

    def resumable(self, scope: int, ledger: int | None, sequence: int) -> None:
        """BadVersion unless every change of this ledger (None: of all) after ``sequence`` is held."""
        self.changes_since(sequence, 1)

    @abstractmethod
    def read_with_head(self, scope: int, ledger: int) -> tuple[Versioned | None, int]:
        """The ledger (None if absent) and the change-log head, read as one consistent snapshot."""

    @abstractmethod
    def write(self, scope: int, ledger: int, data: bytes, expected_version: int) -> Versioned:
        """Replace the metadata if its version is ``expected_version``, else BadVersion."""

    def write_many(self, writes: list[tuple[int, int, bytes, int]]) -> list[Versioned | StoreError]:
        """Each (scope, ledger, data, expected_version) written as ``write`` writes it, in order, each
        with its own outcome (never all-or-nothing): the Versioned written or the StoreError."""
        out: list[Versioned | StoreError] = []
        for w in writes:
            try:
                out.append(self.write(*w))
            except StoreError as exc:
                out.append(exc)
        return out

    def create_many(self, creates: list[tuple[int, int, bytes]]) -> list[Versioned | StoreError]:
        """Each (scope, ledger, data) created as ``create`` creates a named ledger, in order, each
        with its own outcome (never all-or-nothing): the Versioned created, or the StoreError
        (LedgerExists for a ledger that exists: create-only, nothing overwritten)."""
        out: list[Versioned | StoreError] = []
        for scope, ledger, data in creates:
            try:
                out.append(self.create(scope, ledger, data))
            except StoreError as exc:
                out.append(exc)
        return out

    @abstractmethod
    def remove(self, scope: int, ledger: int, expected_version: int | None) -> None:
        """Delete (conditionally when ``expected_version`` is given)."""

    @abstractmethod
    def ledger_ids(self, scope: int, after: int | None, limit: int) -> list[int]:
        """Up to ``limit`` ledger ids of ``scope`` greater than ``after``, ascending."""

    @abstractmethod
    def scan(self, start: tuple[int, int] | None, end: tuple[int, int] | None,
             batch: int) -> Iterator[list[Versioned]]:
        """Every ledger whose (scope, ledger) is in [start, end) (None: unbounded), ascending by
        the 128-bit id, in lists of at most ``batch``. Each ledger is read at one version; the
        scan as a whole is not a snapshot (a ledger changed meanwhile shows either state)."""

    @abstractmethod
    def scopes(self) -> list[int]:
        """Every scope holding at least one ledger, ascending."""

    # --- change log ---
    @abstractmethod
    def head_sequence(self) -> int:
        """The sequence of the newest change (0 when there is none)."""

    @abstractmethod
    def changes_since(self, sequence: int, limit: int = 1000) -> list[Change]:
        """Changes with a sequence above ``sequence``, in order; BadVersion if already pruned."""

    def wait_for_change(self, sequence: int, timeout: float) -> bool:
        """Block until the head passes ``sequence`` or ``timeout`` runs out; True if it passed."""
        with self._changed:
            return self._changed.wait_for(lambda: self.head_sequence() > sequence, timeout)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def new_registry(self):
        """The bookie registry that goes with this store (in memory unless the store keeps one)."""
        from bkdisk.metaservice.discovery import Registry
        return Registry()

    def close(self) -> None:  # noqa: B027 - a no-op for a store that holds no resources
        """Release the store's resources."""
