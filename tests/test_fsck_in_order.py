"""fsck.lanes.in_order: results in the items' order whatever order the threads finish in, and never
more than ``width`` items read ahead of the one given back."""
from __future__ import annotations

import threading
import time

import pytest

from bkdisk.fsck.lanes import in_order


@pytest.mark.parametrize("width", [1, 2, 3])
def test_results_come_in_the_items_order_with_bounded_read_ahead(width):
    read: list[int] = []
    given: list[int] = []
    threads: set[str] = set()

    def items():
        for i in range(12):
            read.append(i)
            assert len(read) - len(given) <= width, "read too far ahead"
            yield i, (12 - i) * 0.002    # later items finish first

    def work(i: int, pause: float) -> int:
        threads.add(threading.current_thread().name)
        time.sleep(pause)
        return i * i

    for r in in_order(work, items(), width):
        given.append(r)
    assert given == [i * i for i in range(12)]
    assert len(threads) == (1 if width == 1 else width)
