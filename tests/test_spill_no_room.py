"""A --tmp-dir that cannot take what a command spills (a full disk; here a file-size limit stands in for
one) ends fsck and inventory with one line naming the spill file and what to do, exit 8, and the
spill folder removed: never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats.digests import DigestType

# The command in a process whose files may not pass 4 KiB (SIGXFSZ ignored: a write past it fails
# with EFBIG, as one to a full disk fails with ENOSPC).
LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
which = sys.argv.pop(1)
if which == "fsck":
    from bkdisk.fsck_cli import console
    sys.argv[0] = "bookie-fsck"
    console()
else:
    from bkdisk.cli import main
    main(sys.argv[1:])
"""


@pytest.fixture(scope="module")
def bookie(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("noroom") / "bookie")
    ledgers = [LedgerSpec(i + 1, [bytes([i, e % 251]) * 10 for e in range(3000)], digest_type=DigestType.CRC32C,
                          password=b"pw") for i in range(2)]
    write_bookie(BookieSpec(ledgers, entry_log_size_limit=1 << 20), root)
    return root


@pytest.mark.parametrize("command", [["fsck"], ["inventory", "--jsonl"]])
def test_a_tmp_dir_without_room_is_one_line(bookie, tmp_path, command):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = [command[0], *([bookie] if command[0] == "fsck" else ["inventory", bookie, *command[1:]]),
            "--memory-limit", "1", "--tmp-dir", str(tmp)]
    if command[0] == "fsck":
        args.append("--no-progress")
    run = subprocess.run([sys.executable, "-c", LIMITED, *args], capture_output=True, text=True, timeout=300)
    err = run.stderr.strip().splitlines()
    assert run.returncode == 8, run.stderr
    assert len(err) == 1 and "Traceback" not in run.stderr, run.stderr
    assert str(tmp) in err[0] and ".bin: cannot write" in err[0] and "--tmp-dir" in err[0]
    assert os.listdir(tmp) == []
