"""The engine must stand alone: importing all of it loads no Qt."""

import subprocess
import sys


def test_engine_imports_no_qt():
    code = (
        "import sys, pkgutil, importlib, mpsstudio.engine as e\n"
        "for m in pkgutil.iter_modules(e.__path__): importlib.import_module('mpsstudio.engine.' + m.name)\n"
        "import mpsstudio.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'PyQt5', 'PyQt6', 'shiboken6')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
