"""DbLedgerStorage's location values are packed and split by formats/index.py's declarations only
(POSITION_BITS, pack_location, unpack_location): the same 32 / 32 split as the index files'."""
from __future__ import annotations

import ast

import numpy as np
import pytest

from bkdisk.formats.dbledger import location_columns, location_value, locations_key, parse_location
from bkdisk.formats.errors import FormatError
from bkdisk.formats.index import POSITION_MASK, pack_location
from tests.test_layering import ROOT


def test_a_location_round_trips_through_the_index_declarations():
    key, value = locations_key(7, 3), location_value(0x1234, 0xFFFF_FFF0)
    loc = parse_location(key, value)
    assert (loc.log_id, loc.offset) == (0x1234, 0xFFFF_FFF0)
    assert loc.packed == pack_location(0x1234, 0xFFFF_FFF0) == int.from_bytes(value, "big")
    cols = location_columns(np.frombuffer(key, np.uint8).reshape(1, -1), np.frombuffer(value, np.uint8).reshape(1, -1))
    assert (int(cols["log"][0]), int(cols["offset"][0])) == (0x1234, 0xFFFF_FFF0)


@pytest.mark.parametrize("log_id, offset", [(1, POSITION_MASK + 1), (POSITION_MASK + 1, 0), (-1, 4)])
def test_a_location_that_does_not_fit_32_bits_each_is_refused_not_folded_into_the_other_half(log_id, offset):
    with pytest.raises(FormatError, match="fit 32 bits each"):
        location_value(log_id, offset)


def test_dbledger_spells_no_split_of_its_own():
    tree = ast.parse((ROOT / "formats/dbledger.py").read_text())
    own = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in (32, 0xFFFFFFFF)]
    assert own == []
