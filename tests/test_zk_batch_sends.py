"""A ZooKeeper multi's reply read op by op in one place (metaservice/zk_batch_sends.py), for the store's
batched creates and writes alike."""
from __future__ import annotations

import ast

from kazoo import exceptions as kx
from kazoo.protocol.states import ZnodeStat

from bkdisk.metaservice.store import StoreError
from bkdisk.metaservice.zk_batch_sends import commit, pipelined
from tests.test_layering import ROOT


class _Multi:
    def __init__(self, reply):
        self.reply = reply

    def commit(self):
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


STAT = ZnodeStat(1, 1, 0, 0, 1, 0, 0, 0, 3, 0, 1)


def test_a_multi_that_applied_gives_every_ops_result():
    reply = commit(_Multi([STAT, "/ledgers/00/0000/L0001"]), 2)
    assert reply.applied and reply.results == [STAT, "/ledgers/00/0000/L0001"] and reply.failed is None


def test_the_op_that_failed_is_the_one_whose_error_is_not_a_rollback():
    exists = kx.NodeExistsError()
    reply = commit(_Multi([kx.RolledBackError(), exists, kx.RuntimeInconsistency()]), 3)
    assert not reply.applied and reply.failed == (1, exists) and not reply.lost


def test_a_short_reply_is_not_applied():
    assert not commit(_Multi([STAT]), 2).applied


def test_a_lost_reply_and_a_multi_refused_whole():
    lost = commit(_Multi(kx.ConnectionLoss()), 1)
    assert lost.lost and not lost.applied
    refused = commit(_Multi(kx.MarshallingError()), 1)
    assert refused == type(refused)(refused=True) and not refused.applied and refused.failed is None


def test_pipelined_sends_what_the_store_can_and_records_why_it_could_not():
    class Store:
        down = {1}
        i = 0

        def _ready(self):
            self.i += 1
            if self.i - 1 in self.down:
                raise StoreError("the session to ZooKeeper is down")
    out: list = [None] * 3
    sent = pipelined(Store(), [(0, "a"), (1, "b"), (2, "c")], out, lambda item: item[1].upper())
    assert sent == [((0, "a"), "A"), ((2, "c"), "C")]
    assert isinstance(out[1], StoreError) and out[0] is None and out[2] is None


def test_no_other_metaservice_module_commits_a_multi_or_sends_a_batch_by_hand():
    offenders = []
    for p in sorted((ROOT / "metaservice").glob("*.py")):
        if p.name == "zk_batch_sends.py":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "commit":
                offenders.append(f"{p.name}:{node.lineno} commits a multi")
            elif isinstance(node, ast.Assign | ast.AnnAssign) and any(
                    isinstance(t, ast.Name) and t.id == "MULTI_BYTES"
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
                offenders.append(f"{p.name}:{node.lineno} declares MULTI_BYTES")
    assert offenders == []
