"""bench/cold_bench.py on a copy of a golden bookie: both reads and the command run over every file
bookie-fsck reads, each after its files were dropped from the page cache, and each prints its figures."""
from __future__ import annotations

from conftest import golden_copy

from bench import cold_bench


def test_the_cold_bench_reads_every_file_fsck_reads_and_times_the_command(tmp_path, capsys):
    root = golden_copy(tmp_path)
    files = cold_bench.fsck_files(str(root))
    assert any(p.endswith(".log") for p in files) and any(p.endswith(".idx") for p in files)
    assert any(p.endswith(".txn") for p in files)
    assert cold_bench.main(["--dir", str(root), "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert f"{len(files)} files" in out
    for row in ("sequential read", "asked read", "bookie-fsck ROOT"):
        assert row in out
