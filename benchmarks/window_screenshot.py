"""A screenshot of the window as a user sees it, offscreen at 1280x740 (MPSSTUDIO_SHOT_SIZE=WxH for another), from a
fresh history:

    python benchmarks/window_screenshot.py OUT.png FILE.json [MORE.json ...]   # the Tools tab, newest result
    python benchmarks/window_screenshot.py --runs OUT.png RUNS.json             # the Runs tab, newest comparison
    python benchmarks/window_screenshot.py --folder DIR OUT.png                 # a folder dropped: its summary
    python benchmarks/window_screenshot.py --runs --folder MODEL OUT.png RUNS.json  # a model folder and its runs
    python benchmarks/window_screenshot.py --folder MODEL --text FILE OUT.png   # a model folder, then its text dropped
    python benchmarks/window_screenshot.py --runs --compare environment --python PY OUT.png RUNS.json
                                                    # the newest run compared by its environment; PY in Preferences
    python benchmarks/window_screenshot.py --runs --waiting URL OUT.png RUNS.json  # runs waiting for a team's server

Each FILE is imported as `mpsstudio history --import` does (a command's --json: a tool result, or runs). With
--runs the runs of the newest comparison are selected (its verdict and chart beside the table); with --folder the
folder is checked as a drop does and its summary window is drawn where it opens, over the main window. What
docs/diagnose*.png, docs/tool-*.png, docs/window-1280x740.png and docs/folder-summary.png are made with."""
import argparse
import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
home = tempfile.mkdtemp(prefix="mpsstudio-shot-")
for name in ("DATA", "CONFIG", "CACHE", "LOG"):
    os.environ[f"MPSSTUDIO_{name}_DIR"] = os.path.join(home, name.lower())

from mpsstudio import cli  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--runs", action="store_true", help="the Runs tab with the newest comparison selected")
parser.add_argument("--folder", default=None, metavar="DIR", help="drop this folder and show its summary")
parser.add_argument("--text", default=None, metavar="FILE", help="with --folder (a model folder): drop this text")
parser.add_argument("--compare", default=None, metavar="KIND",
                    help="with --runs: select the newest run and show its comparison of this kind (environment, "
                         "setting, selected)")
parser.add_argument("--python", default=None, metavar="PATH", help="another Python environment in Preferences")
parser.add_argument("--waiting", default=None, metavar="URL",
                    help="the imported runs queued for the team's server at URL, as a push it did not answer leaves them")
parser.add_argument("out")
parser.add_argument("files", nargs="*")
args = parser.parse_args()
for path in args.files:
    if cli.main(["history", "--import", path]) != cli.EXIT_OK:
        raise SystemExit(f"could not import {path}")
if args.waiting:
    from mpsstudio.engine.history.store import RunStore

    queued = RunStore()
    ids = [r.id for r in queued.summaries()]
    queued.queue.add(args.waiting, ids)
    queued.queue.failed(args.waiting, ids[0], f"the server at {args.waiting} did not answer (Connection refused)")
    queued.close()
if args.python:
    from mpsstudio.engine.process.interpreter import check
    from mpsstudio.gui.preferences import Preferences

    found = check(args.python)
    Preferences(pythons=[{"path": found.path, "label": found.label()}]).save()

from PySide6.QtCore import QPoint, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QColor, QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from mpsstudio.gui.window.main_window import MainWindow  # noqa: E402

app = QApplication([])
window = MainWindow(keep_spare=False)  # a picture needs no spare run process (spawned, it would rerun this script)
width, height = (int(v) for v in os.environ.get("MPSSTUDIO_SHOT_SIZE", "1280x740").split("x"))
window.resize(width, height)
window.show()
QTimer.singleShot(0, window.start_loading)  # as the app does (gui/app.py)
waited = [0]


def prepare():
    if args.folder and args.runs:  # a model folder opened beside its runs
        window.check_folder(args.folder)
    if args.runs:
        from mpsstudio.engine.analysis.compare import compare

        window.tabs.setCurrentWidget(window.results)
        if args.compare:
            newest = max(window.store.all(), key=lambda r: r.created_at)
            window.results.select_ids([r.id for r in window.store.all()] if args.compare == "selected" else [newest.id])
            combo = window.results.compare_combo
            index = next(i for i in range(combo.count()) if str(combo.itemData(i)).startswith(args.compare))
            combo.setCurrentIndex(index)
            window.results._update_chart()
            return
        comparisons = compare(window.store.all())
        window.results.select_ids([r.id for r in comparisons[-1].all_runs] if comparisons else [])
    elif args.folder:
        window.check_folder(args.folder)
        if args.text:
            window.handle_drop([args.text])
    else:
        window.tabs.setCurrentWidget(window.tools)
        window.tools.reload()
        window.tools.list.setCurrentRow(0)


def prepare_once_loaded():
    if window.state.catalog is None and waited[0] < 120:  # the sidebar once PyTorch has loaded
        waited[0] += 1
        QTimer.singleShot(250, prepare_once_loaded)
        return
    prepare()
    QTimer.singleShot(1500, shoot)


def shoot():
    from mpsstudio.engine.models.hf_folder import is_model_folder

    model = bool(args.folder) and is_model_folder(args.folder)  # a model folder has no summary window
    if args.text and args.text not in window.setup.facts.text_summaries and waited[0] < 240:  # once tokenized
        waited[0] += 1
        QTimer.singleShot(250, shoot)
        return
    if args.folder and not model and window.folders.summary is None and waited[0] < 240:  # the folder once checked
        waited[0] += 1
        QTimer.singleShot(250, shoot)
        return
    app.processEvents()
    picture = window.grab()
    summary = window.folders.summary if args.folder else None
    if summary is not None:  # a window of its own: drawn where it opens, centred over the main window, with a
        app.processEvents()  # plain title bar and frame (offscreen, Qt draws no window decorations)
        inner = summary.grab()
        bar = 28
        x = (picture.width() - inner.width()) // 2
        y = (picture.height() - inner.height() - bar) // 2
        painter = QPainter(picture)
        painter.fillRect(x + 6, y + 8, inner.width(), inner.height() + bar, QColor(0, 0, 0, 60))  # its shadow
        painter.fillRect(x, y, inner.width(), bar, QColor(232, 232, 232))
        painter.setPen(QColor(40, 40, 40))
        painter.drawText(x, y, inner.width(), bar, Qt.AlignmentFlag.AlignCenter, summary.windowTitle())
        painter.drawPixmap(QPoint(x, y + bar), inner)
        painter.setPen(QColor(150, 150, 150))
        painter.drawRect(x, y, inner.width() - 1, inner.height() + bar - 1)
        painter.end()
    picture.save(args.out)
    window.close()  # its threads and spare process end before Qt's objects are torn down (else a crash at exit)
    app.quit()


QTimer.singleShot(0, prepare_once_loaded)
app.exec()
print(args.out)
