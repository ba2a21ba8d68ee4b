"""The `platform/` folder holds the `perdura` package; it must never shadow the standard library's `platform`."""

from __future__ import annotations

import platform
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def test_import_platform_is_the_standard_library_module():
    assert platform.__file__ is not None
    path = Path(platform.__file__).resolve()
    assert path.parent == STDLIB
    assert not path.is_relative_to(ROOT)
    assert platform.python_version()  # the real module's API


def test_import_platform_from_the_project_root_is_the_standard_library_module():
    """As `python manage.py ...` or `python -c` run from the repository root, with '' first on sys.path."""
    code = "import platform, sys; print(platform.__file__); print(sys.path[0] == '')"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    ).stdout.split("\n")
    assert Path(out[0]).resolve().parent == STDLIB
    assert out[1] == "True"


def test_platform_folder_is_not_a_python_package():
    folder = ROOT / "platform"
    assert folder.is_dir()
    assert not (folder / "__init__.py").exists()
    assert sorted(p.name for p in folder.glob("*.py")) == []
    assert not (ROOT / "platform.py").exists()
    assert (folder / "perdura" / "__init__.py").is_file()


def test_perdura_is_imported_from_the_platform_folder():
    import perdura

    assert Path(perdura.__file__).resolve().parent == ROOT / "platform" / "perdura"
