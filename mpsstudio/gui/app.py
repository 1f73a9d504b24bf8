"""Start the desktop app: the window first, PyTorch in the background.

`mpsstudio` / `python -m mpsstudio` open the window; `--demo --screenshot PATH` runs the default comparison
on every available device, saves a screenshot of the window and exits (0, or 1 if a run failed).
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import resources

from ..engine.basics.paths import APP_NAME


def app_icon():
    from PySide6.QtGui import QIcon

    icon = QIcon()
    root = resources.files("mpsstudio.resources")
    for size in (16, 32, 64, 128, 256, 512, 1024):
        with resources.as_file(root / "icons" / f"icon-{size}.png") as path:
            icon.addFile(str(path))
    with resources.as_file(root / "icon.svg") as path:
        icon.addFile(str(path))
    return icon


def _forward_file_open(app, window) -> None:
    """A folder dropped on the Dock icon arrives as a FileOpen event, not as an argument."""
    from PySide6.QtCore import QEvent, QObject

    class FileOpen(QObject):
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.FileOpen:
                window.handle_drop([event.file()])
                return True
            return False

    app._file_open_filter = FileOpen(app)
    app.installEventFilter(app._file_open_filter)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mpsstudio", description="Open the MPS Studio window.")
    p.add_argument("--demo", action="store_true",
                   help="run the default comparison on every available device, then exit")
    p.add_argument("--screenshot", metavar="PATH", help="with --demo: save a screenshot of the window to PATH")
    p.add_argument("--startup-timing", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


SIGNAL_CHECK_MS = 250  # how soon the window notices SIGTERM / SIGHUP


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    from ..engine.process.ending import ending_signals

    ended_by: list[int] = []
    window = None

    def on_signal(signum: int) -> None:  # SIGTERM / SIGHUP: stop the run, keep it (closeEvent), quit
        ended_by.append(signum)
        if window is not None:
            from PySide6.QtCore import QTimer

            QTimer.singleShot(0, window.close)
    # From the first line: a SIGTERM while Qt and the window are still loading ends the app the same way (exit 143),
    # not by the signal's default action
    with ending_signals(on_signal):
        window, code = _open_window(args, ended_by)
        if window is not None and code is None:
            code = _run_window(args, window, ended_by)
    if ended_by:
        return 128 + ended_by[0]
    return code


def _open_window(args: argparse.Namespace, ended_by: list[int]):
    """The window, shown; (window, None) to go on, or (window or None, exit code) when done already."""
    t_import = time.perf_counter()
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    import pyqtgraph  # noqa: F401  (imported here so the timing below starts after it, as documented)

    t_qt = time.perf_counter()
    if ended_by:
        return None, 128 + ended_by[0]
    QCoreApplication.setOrganizationName("MPS Studio")
    QCoreApplication.setApplicationName(APP_NAME)
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationDisplayName(APP_NAME)
    app.setWindowIcon(app_icon())
    from .collector import install

    install(app)  # garbage is collected in the GUI thread only (collector.py says why)

    from .window import MainWindow

    window = MainWindow(demo_screenshot=args.screenshot if args.demo else None, demo=args.demo)
    _forward_file_open(app, window)
    window.show()
    if args.demo:
        window.resize(1440, 900)  # a screenshot-sized window, also on small (offscreen) screens
    if args.startup_timing:
        app.processEvents()
        window.repaint()
        painted = time.perf_counter()
        torch_loaded = "torch" in sys.modules
        sizes = sorted({s.width() for s in app.windowIcon().availableSizes()})
        print(f"window painted {painted - t_qt:.3f} s after PySide6 and pyqtgraph were imported "
              f"(their import took {t_qt - t_import:.3f} s); torch imported before paint: {torch_loaded}")
        print(f"window icon: {len(sizes)} sizes" + (f", {sizes[0]}-{sizes[-1]} px" if sizes else ""))
        window.close()
        return window, 0
    return window, None


def _run_window(args: argparse.Namespace, window, ended_by: list[int]) -> int:
    """The event loop until the window closes (Quit, or a SIGTERM / SIGHUP that arrived at any time)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    if ended_by:  # the signal came while the window was being built: it closes as soon as it is up
        QTimer.singleShot(0, window.close)
    else:
        QTimer.singleShot(0, window.start_loading)
    # Python runs a signal's handler only between its own bytecodes: a timer gives it the chance while Qt waits
    ticker = QTimer()
    ticker.timeout.connect(lambda: None)
    ticker.start(SIGNAL_CHECK_MS)
    app = QApplication.instance()
    assert app is not None  # the window is up: its application exists
    code = app.exec()
    ticker.stop()
    return window.exit_code if args.demo else code
