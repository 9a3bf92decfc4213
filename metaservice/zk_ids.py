"""New ledger ids in ZooKeeper as BookKeeper generates them (LongZkLedgerIdGenerator), and BP-35's
random ids for scoped ledgers."""
from __future__ import annotations

from bkdisk.metaservice import zk_layout as L
from bkdisk.metaservice.store import SCOPE0_MAX_LEDGER, StoreError, scoped_ledger_candidate


def generate_id(store, scope: int) -> int:
    """A new id in ``scope`` of ZkStore ``store`` (whose ``_call`` maps a lost session)."""
    if scope:
        return scoped_ledger_candidate()
    # BookKeeper's first stage: an ephemeral sequential idgen/ID-<n> gives n, then goes.
    base = f"{store.root}/idgen"
    store._call(store.zk.ensure_path, base)
    node = store._call(store.zk.create, f"{base}/ID-", b"", ephemeral=True, sequence=True)
    store._call(store.zk.delete, node)
    lid = int(node.rsplit("ID-", 1)[1])
    if lid >= L.JAVA_INT_MAX or lid < 0:
        lid = _generate_long(store)
    return lid


def _generate_long(store) -> int:
    """The second stage, once idgen passes Integer.MAX_VALUE: idgen-long/HOB-<high>/ID-<low>."""
    base = f"{store.root}/idgen-long"
    store._call(store.zk.ensure_path, base)
    hobs = sorted(n for n in store._call(store.zk.get_children, base) if n.startswith("HOB-"))
    high = int(hobs[-1][4:]) if hobs else 1
    while True:
        hob = f"{base}/HOB-{high:010d}"
        store._call(store.zk.ensure_path, hob)
        node = store._call(store.zk.create, f"{hob}/ID-", b"", ephemeral=True, sequence=True)
        store._call(store.zk.delete, node)
        low = int(node.rsplit("ID-", 1)[1])
        if 0 <= low < L.JAVA_INT_MAX:
            lid = (high << 32) | low
            if lid > SCOPE0_MAX_LEDGER:
                raise StoreError("scope 0 ledger ids are exhausted")
            return lid
        high += 1
