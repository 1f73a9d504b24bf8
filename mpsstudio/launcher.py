"""The `mpsstudio` command: no subcommand opens the window, a subcommand runs the headless CLI.

It sits above both front ends (an import-linter contract in pyproject.toml keeps the CLI and the GUI from
importing each other), and imports neither Qt nor torch until it knows which one is wanted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

GUI_FLAGS = ("--demo", "--screenshot", "--startup-timing")


def wants_window(argv: Sequence[str]) -> bool:
    return not argv or argv[0].split("=")[0] in GUI_FLAGS


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if wants_window(argv):
        return _open_window(argv)
    from .cli import main as cli_main

    return cli_main(argv)


def _open_window(argv: list[str]) -> int:
    try:
        from .gui.app import main as gui_main
    except ImportError as exc:
        print(f"mpsstudio: the window needs PySide6 and pyqtgraph ({exc}); install them, or use a subcommand "
              f"such as `mpsstudio demo`.", file=sys.stderr)
        return 2
    return gui_main(argv)
