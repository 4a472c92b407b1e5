"""The checked-in gRPC stubs match what tools/generate_protos.py makes from ../../proto now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLIENT_DIR = Path(__file__).resolve().parent.parent
CHECKED_IN = CLIENT_DIR / "src" / "adk_grpc_services" / "_proto"


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_stubs_match_the_protos(tmp_path: Path) -> None:
    fresh = tmp_path / "_proto"
    subprocess.run(
        [sys.executable, str(CLIENT_DIR / "tools" / "generate_protos.py"), "--out", str(fresh)],
        check=True,
        capture_output=True,
    )
    expected, actual = files_under(fresh), files_under(CHECKED_IN)
    assert sorted(actual) == sorted(expected), "stub files differ: run tools/generate_protos.py"
    stale = [name for name in expected if actual[name] != expected[name]]
    assert not stale, f"stubs out of date ({', '.join(stale)}): run tools/generate_protos.py"
