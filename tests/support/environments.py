"""Other Python environments, made in a fraction of a second."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path


def make_venv(folder: Path, packages: dict[str, str] | None = None, share_ours: bool = False) -> Path:
    """A venv in a fraction of a second (no pip): `packages` name -> its __init__.py; `share_ours` links this
    suite's site-packages in (the same torch: another interpreter and environment, for the mechanics)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    lib = next((folder / "lib").glob("python3*")) / "site-packages"
    for name, text in (packages or {}).items():
        (lib / name).mkdir(parents=True)
        (lib / name / "__init__.py").write_text(text)
    if share_ours:
        (lib / "ours.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return folder / "bin" / "python"

