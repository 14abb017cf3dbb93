"""The wheel holds every data file of the package, installs into a fresh venv and runs there (offline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "twinloop"


def _package_data() -> set[str]:
    """Every non-Python file of the package, as a path inside the wheel (``twinloop/catalog/gpus.yaml``)."""
    try:
        listed = subprocess.run(["git", "ls-files", "src/twinloop"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()  # fmt: skip
        files = [ROOT / f for f in listed if (ROOT / f).is_file()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file on disk
        files = [p for p in PKG.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return {str(p.relative_to(ROOT / "src")) for p in files if p.suffix not in (".py", ".pyc")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel from a clean copy of the source (no network, no build isolation)."""
    tmp = tmp_path_factory.mktemp("wheel")
    tree = tmp / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", tree / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(dist), str(tree)], check=True, timeout=300)  # fmt: skip
    (built,) = dist.glob("twinloop-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_every_package_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _package_data()
    assert {"twinloop/catalog/gpus.yaml", "twinloop/scenarios/default.yaml", "twinloop/web/static/app.js"} <= expected
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel (add them to [tool.setuptools.package-data]): {missing}"
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "twinloop = twinloop.cli.main:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # The dependencies come from this interpreter's site-packages (offline); twinloop itself only from the wheel:
    # a path listed in a .pth file is added without processing its own .pth files (no editable install leaks in).
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "deps-from-test-runner.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, timeout=300)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    exe = str(venv / "bin" / "twinloop")

    def run(*args: str) -> str:
        out = subprocess.run([exe, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout

    where = subprocess.run([str(py), "-c", "import twinloop; print(twinloop.__file__)"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, check=True).stdout  # fmt: skip
    assert where.startswith(str(venv)), where
    gpus = json.loads(run("gpus", "--json"))["gpus"]
    assert any(g["name"] == "h100-sxm" for g in gpus)
    assert run("--version").strip() == "twinloop 0.1.0"
    sim = json.loads(run("sim", "--duration", "30s", "--json"))  # the packaged default scenario
    assert sim["gpus"] > 0
    static = "from importlib.resources import files; print((files('twinloop') / 'web' / 'static' / 'app.js').is_file())"
    assert subprocess.run([str(py), "-c", static], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=True).stdout.strip() == "True"  # fmt: skip
    # Typer detects the shell from the process's ancestors (shellingham): run it from one, whatever started the tests
    # (under nohup or a runner with no shell above it, detection failed and the script said "Shell  not supported").
    # (two commands, so bash stays the parent instead of exec-ing the last one)
    shown = subprocess.run(["bash", "-c", f"'{exe}' --show-completion; exit $?"], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    assert shown.returncode == 0 and "_TWINLOOP_COMPLETE" in shown.stdout, shown.stderr
