"""A screenshot of the window's Tools tab showing a tool result: `python benchmarks/tools_screenshot.py OUT.png
RESULT.json [MORE.json ...]` imports each file (a command's --json) into a fresh history, opens the window
offscreen at 1280x740 (MPSSTUDIO_SHOT_SIZE=WxH for another) and saves it with the newest result selected, the Tools
tab in the room the plots had. What docs/diagnose*.png and docs/tool-*.png are made with (docs/benchmarks.md)."""
import os
import sys
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
home = tempfile.mkdtemp(prefix="mpsstudio-shot-")
for name in ("DATA", "CONFIG", "CACHE", "LOG"):
    os.environ[f"MPSSTUDIO_{name}_DIR"] = os.path.join(home, name.lower())

from mpsstudio import cli  # noqa: E402

out, files = sys.argv[1], sys.argv[2:]
for path in files:
    if cli.main(["history", "--import", path]) != cli.EXIT_OK:
        sys.exit(f"could not import {path}")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from mpsstudio.gui.window.main_window import MainWindow  # noqa: E402

app = QApplication(sys.argv[:1])
window = MainWindow()
width, height = (int(v) for v in os.environ.get("MPSSTUDIO_SHOT_SIZE", "1280x740").split("x"))
window.resize(width, height)
window.show()
QTimer.singleShot(0, window.start_loading)  # as the app does (gui/app.py)
window.tabs.setCurrentWidget(window.tools)
window.tools.reload()
window.tools.list.setCurrentRow(0)
waited = [0]


def shoot():
    waited[0] += 1
    if window.catalog is None and waited[0] < 120:  # the sidebar once PyTorch has loaded
        QTimer.singleShot(250, shoot)
        return
    app.processEvents()
    window.grab().save(out)
    app.quit()


QTimer.singleShot(1000, shoot)
app.exec()
print(out)
