"""Bookie registrations mirrored into ZooKeeper as BookKeeper keeps them: an ephemeral znode
<root>/available/<bookieId> (or available/readonly/<bookieId>) holding the BookieServiceInfoFormat bytes.

The service's ZooKeeper session owns these znodes; when ZooKeeper expires that session it deletes
them, so after every reconnection the registry writes back every registration still held by a live
Register stream (the bookie itself is still connected to the service).

Bookies of the cluster that registered in ZooKeeper themselves (real BookKeeper bookies) are listed
and resolved too, read from the same znodes; their changes reach WatchBookies only through the
service's own registrations (the service sets no ZooKeeper watch on them)."""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError, NoNodeError

from bkdisk.metaservice.discovery import POLL_SECONDS, BookieHeld, Registration, Registry

if TYPE_CHECKING:   # the store makes its registry (ZkStore.new_registry) and hands itself in
    from bkdisk.metaservice.zk_store import ZkStore

log = logging.getLogger(__name__)


class ZkRegistry(Registry):
    def __init__(self, store: ZkStore):
        super().__init__()
        self.store = store
        self._zk_lock = threading.Lock()
        # Every ZooKeeper session this service has had: a znode one of them made is the service's own.
        self._sessions_of_ours: set[int] = set()
        self._note_session()
        store.on_session(self._session_back)

    def _note_session(self) -> None:
        if self.store.zk.client_id:
            self._sessions_of_ours.add(int(self.store.zk.client_id[0]))

    def _session_back(self, _renewed: bool) -> None:
        self._note_session()
        self.resync()

    def _in_zookeeper(self) -> list[Registration]:
        """Every registration znode under available/ and available/readonly/ (session 0: not ours)."""
        out, zk = [], self.store.zk
        for read_only, sub in ((False, "available"), (True, "available/readonly")):
            base = f"{self.store.root}/{sub}"
            try:
                names = zk.get_children(base)
            except NoNodeError:
                continue
            for name in names:
                if not read_only and name == "readonly":
                    continue
                try:
                    data, _stat = zk.get(f"{base}/{name}")
                except NoNodeError:
                    continue          # it went between the listing and the read
                out.append(Registration(name, read_only, data, 0))
        return out

    def listing(self) -> tuple[list[Registration], int]:
        regs, seq = super().listing()
        if not self.store._up.is_set():
            return regs, seq            # ZooKeeper away: what the service holds itself
        ours = {r.bookie_id for r in regs}
        try:
            others = [r for r in self._in_zookeeper() if r.bookie_id not in ours]
        except Exception as exc:   # a lost connection: list what the service holds
            log.warning("cannot list registrations in ZooKeeper now: %s", exc)
            others = []
        return sorted(regs + others, key=lambda r: r.bookie_id), seq

    def get(self, bookie_id: str) -> Registration | None:
        reg = super().get(bookie_id)
        if reg is not None or not self.store._up.is_set():
            return reg
        try:
            return next((r for r in self._in_zookeeper() if r.bookie_id == bookie_id), None)
        except Exception:   # unknown while ZooKeeper is away
            return None

    def _path(self, bookie_id: str, read_only: bool) -> str:
        sub = "available/readonly" if read_only else "available"
        return f"{self.store.root}/{sub}/{bookie_id}"

    def _put(self, bookie_id: str, read_only: bool, info: bytes) -> None:
        """Write the registration's ephemeral znode, replacing one an earlier session of this service
        left (not yet expired) at either path; BookieHeld when a session not the service's (a real
        bookie) holds the id, writable or read-only."""
        foreign = self._foreign_owner(bookie_id)
        if foreign is not None:
            raise BookieHeld(f"{bookie_id} is registered in ZooKeeper by a session that is not the service's "
                             f"(a bookie of the cluster: session 0x{foreign:x})")
        zk, path = self.store.zk, self._path(bookie_id, read_only)
        try:
            zk.create(path, info, ephemeral=True)
        except NodeExistsError:
            data, stat = zk.get(path)
            if stat.ephemeralOwner != zk.client_id[0]:     # an earlier session of the service's: replace it
                zk.delete(path)
                zk.create(path, info, ephemeral=True)
            elif data != info:
                zk.set(path, info)
        self._drop(bookie_id, not read_only)    # what an earlier session of ours left at the other path

    def _wait_for_foreign_owner(self, bookie_id: str) -> None:
        """Wait up to ``takeover_wait`` for a bookie outside the service holding ``bookie_id`` to let
        go (its session expiring), as a BookKeeper bookie waits before it refuses to register;
        BookieHeld when it does not. ZooKeeper away: nothing to wait for now (resync() checks again)."""
        deadline = time.monotonic() + self.takeover_wait
        while True:
            try:
                foreign = self._foreign_owner(bookie_id)
            except Exception as exc:   # a lost connection
                log.warning("cannot look up %s in ZooKeeper now: %s", bookie_id, exc)
                return
            if foreign is None:
                return
            if time.monotonic() >= deadline:
                raise BookieHeld(f"{bookie_id} is registered in ZooKeeper by a session that is not the service's "
                                 f"(a bookie of the cluster: session 0x{foreign:x}; waited {self.takeover_wait:g} "
                                 "s for it to end)")
            time.sleep(POLL_SECONDS)

    def _foreign_owner(self, bookie_id: str) -> int | None:
        """The session of a znode registering ``bookie_id`` (writable or read-only) that no session of
        this service made, if any."""
        for ro in (False, True):
            stat = self.store.zk.exists(self._path(bookie_id, ro))
            if stat is not None and stat.ephemeralOwner not in self._sessions_of_ours:
                return int(stat.ephemeralOwner)
        return None

    def _drop(self, bookie_id: str, read_only: bool) -> None:
        try:
            self.store.zk.delete(self._path(bookie_id, read_only))
        except NoNodeError:
            pass

    def register(self, bookie_id: str, read_only: bool, info: bytes, session: int) -> None:
        if self.store._up.is_set():
            self._wait_for_foreign_owner(bookie_id)     # before the service lists it as its own
        super().register(bookie_id, read_only, info, session)
        if not self.store._up.is_set():
            return                          # resync() writes it once the session is back
        try:
            with self._zk_lock:
                self._put(bookie_id, read_only, info)
        except BookieHeld:                  # a bookie of the cluster registered it in the meantime
            super().unregister(bookie_id, session)
            raise
        except Exception as exc:   # resync() writes it back after the reconnect
            log.warning("cannot register %s in ZooKeeper now: %s", bookie_id, exc)

    def unregister(self, bookie_id: str, session: int | None = None) -> bool:
        reg = super().get(bookie_id)
        gone = super().unregister(bookie_id, session)
        if gone and reg is not None:
            with self._zk_lock:
                try:
                    self._drop(bookie_id, reg.read_only)
                except Exception as exc:   # an ephemeral goes with the session anyway
                    log.warning("cannot remove %s from ZooKeeper now: %s", bookie_id, exc)
        return gone

    def resync(self) -> None:
        """Write back every live registration (after a reconnect, maybe with a new session)."""
        regs, _ = super().listing()   # ours only: never take over a real bookie's znode
        with self._zk_lock:
            for reg in regs:
                try:
                    self._put(reg.bookie_id, reg.read_only, reg.info)
                except BookieHeld as exc:   # a bookie of the cluster took the id while the service was away
                    log.warning("cannot re-register %s in ZooKeeper: %s", reg.bookie_id, exc)
                except Exception as exc:   # the next reconnect tries again
                    log.warning("cannot re-register %s in ZooKeeper: %s", reg.bookie_id, exc)
