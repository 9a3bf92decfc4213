"""Re-run protoc to rebuild a ``_pb2.py`` module and its ``_pb2.pyi`` type stub from a .proto here
(optional arg: output dir)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
REPO_ROOT = PROTO_DIR.parents[1]
PROTO_NAME = "bookkeeper_formats.proto"


def regenerate(out_dir: Path | None = None, proto_name: str = PROTO_NAME) -> Path:
    """Run ``python -m grpc_tools.protoc`` on ``proto_name`` and return the path of the generated ``_pb2.py``.

    The ``_pb2.pyi`` stub protoc writes beside it gives mypy the messages' fields and enums."""
    out = Path(out_dir) if out_dir is not None else PROTO_DIR
    out.mkdir(parents=True, exist_ok=True)
    rel_proto_dir = PROTO_DIR.relative_to(REPO_ROOT)
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", str(rel_proto_dir),
           f"--python_out={out}", f"--pyi_out={out}", str(rel_proto_dir / proto_name)]
    subprocess.run(cmd, cwd=REPO_ROOT, check=True)
    return out / proto_name.replace(".proto", "_pb2.py")


if __name__ == "__main__":
    print(regenerate(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
