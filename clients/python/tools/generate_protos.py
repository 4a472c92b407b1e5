"""Regenerates the Python gRPC stubs of the adk.session.v1 / adk.memory.v1 contract.

The stubs are checked in under ``src/adk_grpc_services/_proto`` so that installing the package
needs neither protoc nor the repository's ``proto/`` folder. Run this after changing a
``.proto`` file (``python tools/generate_protos.py``); ``tests/test_generated_stubs.py`` runs it
into a temporary folder and fails when the checked-in copy has drifted.

protoc writes imports rooted at the proto package (``from adk.session.v1 import ...``); they are
rewritten to live under ``adk_grpc_services._proto`` so the stubs import without touching
``sys.path``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

CLIENT_DIR = Path(__file__).resolve().parent.parent
DEFAULT_PROTO_ROOT = CLIENT_DIR.parent.parent / "proto"
DEFAULT_OUT = CLIENT_DIR / "src" / "adk_grpc_services" / "_proto"
PROTO_FILES = ("adk/session/v1/session.proto", "adk/memory/v1/memory.proto")
PACKAGE = "adk_grpc_services._proto"

_IMPORT = re.compile(r"^from adk(\.[\w.]+)? import ", re.MULTILINE)


def generate(proto_root: Path, out: Path) -> None:
    """Writes the stubs for PROTO_FILES under ``out`` (replacing its contents)."""
    with tempfile.TemporaryDirectory() as raw:
        raw_dir = Path(raw)
        well_known = Path(protoc.__file__).parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{proto_root}",
            f"-I{well_known}",
            f"--python_out={raw_dir}",
            f"--pyi_out={raw_dir}",
            f"--grpc_python_out={raw_dir}",
            *PROTO_FILES,
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {', '.join(PROTO_FILES)} in {proto_root}")
        if out.exists():
            shutil.rmtree(out)
        for source in sorted(raw_dir.rglob("*.py*")):
            target = out / source.relative_to(raw_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = _IMPORT.sub(
                lambda m: f"from {PACKAGE}.adk{m.group(1) or ''} import ", source.read_text()
            )
            target.write_text(text)
    # Packages for every folder, so setuptools ships them and imports are plain.
    for folder in [out, *sorted(p for p in out.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").write_text("")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto-root", type=Path, default=DEFAULT_PROTO_ROOT)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    generate(args.proto_root, args.out)
    print(f"wrote stubs for {len(PROTO_FILES)} proto files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
