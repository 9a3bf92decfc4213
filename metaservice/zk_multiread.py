"""ZooKeeper's multiRead (3.6+, opcode 22) spoken through kazoo's protocol layer, which has no
call for it: many getData in one request and one reply. A bulk read over kazoo's one-request-per-
znode calls spends its time in kazoo's per-request machinery, not in ZooKeeper."""
from __future__ import annotations

from collections import namedtuple

from kazoo.exceptions import EXCEPTIONS, NoNodeError
from kazoo.protocol.serialization import int_struct, multiheader_struct, read_buffer, stat_struct, write_string
from kazoo.protocol.states import ZnodeStat

GET_DATA = 4
ERROR = -1


class MultiRead(namedtuple("MultiRead", "paths")):
    """The request kazoo's connection sends as it is (``type`` is the opcode); no watches are set."""

    type = 22

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b += multiheader_struct.pack(GET_DATA, False, -1)
            b += write_string(path)
            b.append(0)                       # watch: no
        b += multiheader_struct.pack(-1, True, -1)
        return b

    @classmethod
    def deserialize(cls, buf, offset):
        """One (data, ZnodeStat) per path in order; None for a znode that does not exist."""
        out: list = []
        while True:
            typ, done, _err = multiheader_struct.unpack_from(buf, offset)
            offset += multiheader_struct.size
            if done:
                return out
            if typ == GET_DATA:
                data, offset = read_buffer(buf, offset)
                out.append((data, ZnodeStat._make(stat_struct.unpack_from(buf, offset))))
                offset += stat_struct.size
            elif typ == ERROR:
                code = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                exc = EXCEPTIONS[code]()
                out.append(None if isinstance(exc, NoNodeError) else exc)
            else:
                raise ValueError(f"multiRead reply: unexpected result type {typ}")


def multi_read_async(zk, paths: list[str]):
    """Send one multiRead of ``paths`` on kazoo client ``zk``; its async result gives the list."""
    result = zk.handler.async_result()
    zk._call(MultiRead(list(paths)), result)
    return result
