"""bench.commands_bench's ``--before DIR`` runs the checkout's own packages, not this install's."""
import subprocess

from bench.commands_bench import command


def test_a_checkout_command_imports_every_package_from_the_checkout(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\nbkdisk = "bkdisk"\n"bkdisk.fsck" = "fsck"\n')
    (tmp_path / "bkdisk").mkdir()
    (tmp_path / "bkdisk" / "__init__.py").write_text("")
    (tmp_path / "bkdisk" / "cli.py").write_text("WHERE = 'checkout cli'\n")
    (tmp_path / "fsck").mkdir()
    (tmp_path / "fsck" / "__init__.py").write_text("WHERE = 'checkout fsck'\n")
    cmd, env = command("bkdisk", [], str(tmp_path))
    probe = "import bkdisk.cli, bkdisk.fsck; print(bkdisk.cli.WHERE, '/', bkdisk.fsck.WHERE)"
    out = subprocess.run([*cmd[:3], probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "checkout cli / checkout fsck"
