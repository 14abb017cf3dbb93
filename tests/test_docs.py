"""The assembled docs must match their sections (so no figure lives only in the assembled file)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_assembled_docs_are_up_to_date(tmp_path: Path) -> None:
    for sub in ("docs", "scripts"):
        shutil.copytree(ROOT / sub, tmp_path / sub)
    subprocess.run(["bash", str(tmp_path / "scripts" / "assemble-docs")], check=True)
    for name in ("calibration.md", "benchmarks.md"):
        assert (tmp_path / "docs" / name).read_text() == (ROOT / "docs" / name).read_text(), (
            f"docs/{name} is stale: run scripts/assemble-docs"
        )
