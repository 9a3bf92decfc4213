"""commandline.lazy_import: a module named at the top of a file is loaded at its first attribute read."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bkdisk.commandline.lazy import lazy_import


def _write_module(tmp_path, name: str) -> None:
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n\ndef double(x):\n    return 2 * x\n")


def test_the_module_is_imported_at_the_first_attribute_read_and_not_before(tmp_path, monkeypatch):
    _write_module(tmp_path, "lazy_probe_a")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = lazy_import("lazy_probe_a")
    assert "lazy_probe_a" not in sys.modules
    assert mod.VALUE == 42 and mod.double(4) == 8
    assert sys.modules["lazy_probe_a"].VALUE == 42
    sys.modules.pop("lazy_probe_a")


def test_a_name_changed_in_the_module_after_loading_is_the_one_read(tmp_path, monkeypatch):
    _write_module(tmp_path, "lazy_probe_c")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = lazy_import("lazy_probe_c")
    assert mod.VALUE == 42
    monkeypatch.setattr(sys.modules["lazy_probe_c"], "VALUE", 7)
    assert mod.VALUE == 7
    sys.modules.pop("lazy_probe_c")


def test_dunder_probes_do_not_load_the_module(tmp_path, monkeypatch):
    _write_module(tmp_path, "lazy_probe_b")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = lazy_import("lazy_probe_b")
    assert not hasattr(mod, "__deepcopy__") and "lazy_probe_b" not in sys.modules


def test_a_missing_module_fails_at_its_first_use_naming_it():
    mod = lazy_import("no_such_module_anywhere")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
        _ = mod.anything


def test_a_dotted_name_does_not_import_its_parent_package_until_used():
    # pyarrow.parquet: binding the stand-in loads neither pyarrow nor its submodule.
    src = textwrap.dedent("""
        import sys
        from bkdisk.commandline.lazy import lazy_import
        pq = lazy_import("pyarrow.parquet")
        before = "pyarrow" in sys.modules
        pq.ParquetFile
        print(before, "pyarrow.parquet" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True"]
