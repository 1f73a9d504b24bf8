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


def prepare_environment() -> None:
    """What must happen before anything imports torch: an environment variable torch would abort on is corrected,
    and the user is told in one sentence (engine/machine/apple.py, correct_fallback_env)."""
    from .engine.machine.apple import correct_fallback_env

    said = correct_fallback_env()
    if said:
        print(f"mpsstudio: {said}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prepare_environment()
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
