"""What the space accounting says of each ledger a bookie holds: its state (whether the bookie's garbage
collector keeps it, and if not, why), its metadata's state, its Pulsar topic and its creation time.

The rules are BookKeeper's (specs/space.md). A ledger whose metadata a view holds as columns
(bookie.near_ledgers) is decided a shape at a time: its state, topic and whether it is over-replicated
are its shape's; only its creation time is its own. Any other ledger is looked up and decided alone."""
from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping

import numpy as np

from bkdisk.bookie.gc_policy import GcSettings
from bkdisk.bookie.metadata_dir import MetadataView, each_metadata, over_replicated
from bkdisk.bookie.near_ledgers import NearLedgers
from bkdisk.bookie.space_rows import Coded
from bkdisk.diskio.distinct import distinct

LIVE, DELETED, NOT_INDEXED, OVER_REPLICATED = "live", "deleted", "not-indexed", "over-replicated"
STATES = (LIVE, DELETED, NOT_INDEXED, OVER_REPLICATED)
MANAGED_LEDGER_KEY = "pulsar/managed-ledger"   # Pulsar's LedgerMetadataUtils: the managed ledger's name
NEVER = np.iinfo(np.int64).max   # the creation time of a ledger metadata gives none (it sorts last)


def topic_of(custom_metadata: Iterable[tuple[str, bytes]]) -> str | None:
    """The Pulsar topic a ledger belongs to: its managed ledger's name (``tenant/namespace/domain/
    local``, or with a cluster before the namespace) as the topic name TopicName.fromPersistenceNamingEncoding
    makes of it; another form of name is given as it is."""
    raw = dict(custom_metadata).get(MANAGED_LEDGER_KEY)
    if raw is None:
        return None
    name = raw.decode("utf-8", "replace")
    parts = name.split("/")
    if len(parts) in (4, 5):
        *owner, domain, local = parts
        return f"{domain}://{'/'.join(owner)}/{urllib.parse.unquote_plus(local)}"
    return name


def ledger_state(indexed: bool, md, bookie_id: str | None, settings: GcSettings, with_metadata: bool) -> str:
    """Whether the collector keeps a ledger whose entries this bookie holds, and if not, why."""
    if not indexed:
        return NOT_INDEXED          # ledgerExists is false: its entries go at the next pass
    if not with_metadata:
        return LIVE
    if md is None:
        return DELETED              # in the bookie's index, not in metadata: ScanAndCompare deletes it
    if settings.over_replicated_check and bookie_id is not None and over_replicated(md, bookie_id):
        return OVER_REPLICATED
    return LIVE


def ledger_facts(md: Mapping, scope: np.ndarray, ledger: np.ndarray, held: np.ndarray, bookie_id: str | None,
                 settings: GcSettings, with_metadata: bool) -> tuple[Coded, Coded, Coded, np.ndarray]:
    """Per (scope, ledger) row: its state, its metadata's state and its topic (as codes: a million ledgers
    share a few of each) and its creation time (NEVER when metadata gives none). ``held``: per row,
    whether the bookie's index has it."""
    n = len(ledger)
    states, md_states, topics = Coded(), Coded(), Coded()
    codes = [np.zeros(n, np.int32) for _ in range(3)]
    ctime = np.full(n, NEVER, np.int64)
    held_by = md.near if isinstance(md, MetadataView) else md
    near = held_by if with_metadata and isinstance(held_by, NearLedgers) and n > 0 else None
    at = near.positions(scope, ledger) if near is not None else np.full(n, -1, np.int64)
    rows = np.flatnonzero(at >= 0)
    if near is not None and len(rows):
        at_rows = at[rows]
        shape = near.shape[at_rows]
        k = len(near.shapes)
        md_code, topic_code, kept_code = (np.zeros(k, np.int32) for _ in range(3))
        dated = np.zeros(k, bool)
        used = distinct(shape).tolist()
        for j, one in zip(used, near.per_shape(lambda m: m, used), strict=True):   # (a ledger of each shape)
            md_code[j], topic_code[j] = md_states.code_of(one.state), topics.code_of(topic_of(one.custom_metadata))
            kept_code[j] = states.code_of(ledger_state(True, one, bookie_id, settings, with_metadata))
            dated[j] = one.ctime is not None
        h = held[rows]
        state = kept_code[shape]   # (the state of a ledger the index holds is its shape's)
        if not h.all():
            state[~h] = states.code_of(ledger_state(False, None, bookie_id, settings, with_metadata))
        codes[0][rows], codes[1][rows], codes[2][rows] = state, md_code[shape], topic_code[shape]
        ctime[rows] = np.where(dated[shape], near.ctime[at_rows], NEVER)
    far = np.flatnonzero(at < 0)
    topic_names: dict = {}   # custom metadata -> its topic (one string a topic, however many ledgers)
    for i, h, m in zip(far.tolist(), held[far].tolist(), each_metadata(md, scope[far], ledger[far]), strict=True):
        codes[0][i] = states.code_of(ledger_state(h, m, bookie_id, settings, with_metadata))
        codes[1][i] = md_states.code_of(None if m is None else m.state)
        if m is not None and m.ctime is not None:
            ctime[i] = m.ctime
        if m is not None and m.custom_metadata not in topic_names:
            topic_names[m.custom_metadata] = topic_of(m.custom_metadata)
        codes[2][i] = topics.code_of(None if m is None else topic_names[m.custom_metadata])
    return (Coded(states.values, codes[0]), Coded(md_states.values, codes[1]), Coded(topics.values, codes[2]),
            ctime)
