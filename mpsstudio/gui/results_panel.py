"""The results panel: every run kept in the history, its comparisons and speedups, a chart, and exports."""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import (QAbstractTableModel, QEvent, QItemSelection, QItemSelectionModel, QModelIndex,
                            QRectF, QSortFilterProxyModel, Qt, Signal)
from PySide6.QtGui import QAction, QColor, QFont, QFontMetrics, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QFileDialog, QFrame, QHBoxLayout, QHeaderView, QLabel,
                               QMenu, QMessageBox, QPushButton, QSplitter, QStackedLayout, QStyle,
                               QStyledItemDelegate, QStyleOptionViewItem, QTableView, QVBoxLayout, QWidget)

from ..engine import results as engine_results
from ..engine.compare import Comparison, compare
from ..engine.errors import UserError
from ..engine.results import RunResult
from ..engine.store import RunStore
from ..formatting import DASH, fmt_bytes, fmt_rate, is_finite, plural
from .export import render_png

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
RUN_ID_ROLE = Qt.ItemDataRole.UserRole + 2
TIMES = "\u00d7"
NO_COMPARISON_HINT = "Run the same setup on two devices to compare them"

# Apple's system colours, readable on light and dark backgrounds alike: one per comparison group.
GROUP_COLORS = ("#0a84ff", "#ff9f0a", "#30d158", "#bf5af2", "#ff375f", "#40c8e0", "#5e5ce6", "#ac8e68")


# -- formatting: numbers for humans ----------------------------------------------------------------------

def fmt_seconds(v) -> str:
    """0.84 s, 12.3 s, 8 min 20 s, 1 h 05 min."""
    if not is_finite(v):
        return DASH
    if v < 10:
        return f"{v:.2f} s"
    if v < 100:
        return f"{v:.1f} s"
    minutes, seconds = divmod(round(v), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_speedup(v) -> str:
    return f"{v:.2f}{TIMES}" if is_finite(v) else DASH


def bar_label(v: float) -> str:
    """"0.44×", "4.7×", "123×": enough digits to read the bar, no more."""
    if v < 1:
        return f"{v:.2f}{TIMES}"
    return f"{v:.1f}{TIMES}" if v < 100 else f"{v:,.0f}{TIMES}"


def fmt_loss(v) -> str:
    if not is_finite(v):
        return DASH
    return f"{v:.4f}" if abs(v) < 100 else f"{v:,.1f}"


def fmt_percent(fraction) -> str:
    return f"{100 * fraction:.1f} %" if is_finite(fraction) else DASH


def local_time(iso: str) -> datetime | None:
    try:
        dt = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone()


def fmt_time(iso: str) -> str:
    """"21 Nov 14:03" in local time; the year appears when it is not this year."""
    dt = local_time(iso)
    if dt is None:
        return iso
    if dt.year != datetime.now().astimezone().year:
        return f"{dt.day} {dt:%b %Y %H:%M}"
    return f"{dt.day} {dt:%b %H:%M}"


def group_letter(i: int) -> str:
    """A, B, ..., Z, AA, AB, ...: a short name for the i-th comparison."""
    letters = string.ascii_uppercase
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = letters[r] + out
    return out


def comparison_title(c: Comparison, sep: str = ", ") -> str:
    """"resnet18 on cifar10, batch 128, fp32" (", inference" for inference runs)."""
    cfg = c.config
    parts = [f"{cfg.model} on {cfg.dataset}", f"batch {cfg.batch_size}", cfg.precision]
    if cfg.mode != "train":
        parts.append(cfg.mode)
    return sep.join(parts)


def device_labels(c: Comparison) -> list[str]:
    """One label per run: the device, plus its machine when the runs come from more than one machine."""
    home = (c.baseline or c.runs[0]).machine
    return [r.config.device if r.machine == home else f"{r.config.device} {DASH} {short_machine(r.machine)}"
            for r in c.runs]


def short_machine(label: str) -> str:
    """"NVIDIA H100 80GB HBM3 on gpu-07" -> "H100 80GB HBM3 on gpu-07"; "Apple M2 Pro, macOS 14.5" -> "Apple M2 Pro"."""
    label = label.removeprefix("NVIDIA ")
    if ", macOS" in label:
        label = label.split(", macOS")[0]
    return label


def warning_color(palette: QPalette) -> QColor:
    """A calm red that reads on the palette's base colour (Apple's system red, light or dark variant)."""
    dark = palette.color(QPalette.ColorRole.Base).lightness() < 128
    return QColor("#ff6961") if dark else QColor("#c4302b")


def device_color(device: str, palette: QPalette) -> QColor:
    """Bars: the accent colour for the Apple GPU, green for CUDA, the palette's grey for the CPU."""
    if device.startswith("mps"):
        return palette.color(QPalette.ColorRole.Highlight)
    if device.startswith("cuda"):
        return QColor("#34a853") if palette.color(QPalette.ColorRole.Base).lightness() >= 128 else QColor("#2e9e4c")
    grey = QColor(palette.color(QPalette.ColorRole.Text))
    grey.setAlphaF(0.45)
    return grey


def group_color(letter: str) -> QColor:
    """The colour of a comparison's badge, from its letter."""
    index = 0
    for ch in letter:
        index = index * 26 + (ord(ch) - 64)
    return QColor(GROUP_COLORS[(index - 1) % len(GROUP_COLORS)])


class GroupBadgeDelegate(QStyledItemDelegate):
    """Paints a comparison's letter as a small coloured badge, so runs of one comparison stand out together."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        letter = index.data(Qt.ItemDataRole.DisplayRole) or ""
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        if not letter:
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        font = QFont(opt.font)
        font.setBold(True)
        font.setPointSizeF(max(font.pointSizeF() * 0.85, 7.0))
        fm = QFontMetrics(font)
        h = min(opt.rect.height() - 6, fm.height() + 2)
        w = max(h, fm.horizontalAdvance(letter) + 10)
        badge = QRectF(opt.rect.center().x() - w / 2 + 0.5, opt.rect.center().y() - h / 2 + 0.5, w, h)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(group_color(letter))
        painter.drawRoundedRect(badge, h / 2, h / 2)
        painter.setPen(QColor("white"))
        painter.setFont(font)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, letter)
        painter.restore()


def placeholder_label(text: str) -> QLabel:
    """Grey centred text on the base colour, framed like the view it stands in for."""
    label = QLabel(text)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setFrameShape(QFrame.Shape.StyledPanel)
    label.setBackgroundRole(QPalette.ColorRole.Base)
    label.setAutoFillBackground(True)
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


# -- the table model -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    header: str
    tooltip: str
    numeric: bool = False


COLUMNS = (
    Column("", "Comparison: runs with the same letter share every setting but the device."),
    Column("Time", "When the run started, in local time."),
    Column("Machine", "The computer the run came from; runs imported from a file are marked."),
    Column("Device", "Where the model was trained: cpu, mps (the Apple GPU) or cuda."),
    Column("Model", "The network that was trained."),
    Column("Dataset", "The data it was trained on."),
    Column("Batch", "Samples per training step.", True),
    Column("Precision", "Number format of the computation: fp32, or fp16/bf16 autocast."),
    Column("Samples/s", "Median training throughput over the measurement windows \u00b1 its interquartile range; "
           "warm-up steps excluded.", True),
    Column("Speedup vs CPU", "Throughput divided by the CPU run of the same comparison.", True),
    Column("Warm-up", "Time of the warm-up steps (graph compilation, autotuning), never counted in throughput.",
           True),
    Column("s/epoch", "Training time of one epoch at the median throughput.", True),
    Column("Final loss", "Mean training loss of the last steps.", True),
    Column("Val. acc.", "Accuracy on the validation split after the last epoch.", True),
    Column("Peak memory", "Most device memory in use during the run.", True),
    Column("Status", "finished, failed (hover for the reason) or cancelled."),
)
COL = {c.header or "Comparison": i for i, c in enumerate(COLUMNS)}


@dataclass
class Cell:
    text: str
    sort: object
    tooltip: str = ""


class RunTableModel(QAbstractTableModel):
    """Runs as rows; cells are formatted once per change so sorting and painting stay cheap."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._runs: list[RunResult] = []
        self._cells: list[list[Cell]] = []
        self._row_of: dict[str, int] = {}
        self.comparisons: list[Comparison] = []
        self.letters: dict[int, str] = {}  # id(comparison) -> letter
        self.comparison_of: dict[str, Comparison] = {}
        self.speedups: dict[str, float | None] = {}

    # data in
    def set_runs(self, runs: list[RunResult]) -> None:
        self.beginResetModel()
        self._runs = list(runs)
        self._row_of = {r.id: i for i, r in enumerate(self._runs)}
        self.comparisons = sorted(compare(self._runs), key=lambda c: min(r.created_at for r in c.runs))
        self.letters = {id(c): group_letter(i) for i, c in enumerate(self.comparisons)}
        self.comparison_of = {r.id: c for c in self.comparisons for r in c.runs}
        self.speedups = {k: v for c in self.comparisons for k, v in c.speedups.items()}
        self._cells = [self._format(r) for r in self._runs]
        self.endResetModel()

    def runs(self) -> list[RunResult]:
        return list(self._runs)

    def run_at(self, row: int) -> RunResult:
        return self._runs[row]

    def row_of(self, run_id: str) -> int | None:
        return self._row_of.get(run_id)

    def letter_of(self, c: Comparison | None) -> str:
        return self.letters.get(id(c), "") if c is not None else ""

    # Qt model interface
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._runs)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        col = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.header
        if role == Qt.ItemDataRole.ToolTipRole:
            return col.tooltip
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int((Qt.AlignmentFlag.AlignRight if col.numeric else Qt.AlignmentFlag.AlignLeft)
                       | Qt.AlignmentFlag.AlignVCenter)
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, col = index.row(), index.column()
        cell = self._cells[row][col]
        run = self._runs[row]
        if role == Qt.ItemDataRole.DisplayRole:
            return cell.text
        if role == SORT_ROLE:
            return cell.sort
        if role == RUN_ID_ROLE:
            return run.id
        if role == Qt.ItemDataRole.ToolTipRole:
            if run.status == "failed" and run.error:
                return run.error
            return cell.tooltip or None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if col == COL["Comparison"]:
                return int(Qt.AlignmentFlag.AlignCenter)
            return int((Qt.AlignmentFlag.AlignRight if COLUMNS[col].numeric else Qt.AlignmentFlag.AlignLeft)
                       | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and col == COL["Status"] and run.status != "finished":
            palette = QApplication.palette()
            if run.status == "failed":
                return warning_color(palette)
            return palette.color(QPalette.ColorRole.PlaceholderText)
        return None

    # formatting one run into cells
    def _format(self, r: RunResult) -> list[Cell]:
        s, cfg = r.summary, r.config
        comparison = self.comparison_of.get(r.id)
        letter = self.letter_of(comparison)
        dt = local_time(r.created_at)
        sps, iqr = s.get("samples_per_s"), s.get("samples_per_s_iqr")
        rate = fmt_rate(sps)
        if is_finite(sps) and is_finite(iqr):
            rate += f" \u00b1 {iqr:,.0f}" if abs(sps) >= 100 else f" \u00b1 {iqr:,.1f}"
        machine = r.machine + (" (imported)" if r.origin == "imported" else "")
        return [
            Cell(letter, letter or "~",
                 f"Comparison {letter}: {comparison_title(comparison)} on {plural(len(comparison.runs), 'device')}."
                 if comparison else "Not compared: no finished run of the same setup on another device."),
            Cell(fmt_time(r.created_at), dt.timestamp() if dt else 0.0,
                 f"{dt:%A %d %B %Y, %H:%M:%S}" if dt else r.created_at),
            Cell(machine, machine.lower(), self._machine_tooltip(r)),
            Cell(cfg.device, cfg.device, str(r.env.get("device_name") or "")),
            Cell(cfg.model, cfg.model.lower(), self._model_tooltip(r)),
            Cell(cfg.dataset, cfg.dataset.lower(), str(s.get("dataset") or "")),
            Cell(f"{cfg.batch_size:,}", float(cfg.batch_size)),
            Cell(cfg.precision, cfg.precision, self._settings_tooltip(r)),
            Cell(rate, _sort_number(sps), self._rate_tooltip(r)),
            self._speedup_cell(r, comparison, letter),
            Cell(fmt_seconds(s.get("warmup_s")), _sort_number(s.get("warmup_s")),
                 f"{plural(int(s['warmup_steps']), 'warm-up step')}" if s.get("warmup_steps") else ""),
            Cell(fmt_seconds(s.get("s_per_epoch")), _sort_number(s.get("s_per_epoch")), self._epoch_tooltip(r)),
            Cell(fmt_loss(s.get("final_loss")), _sort_number(s.get("final_loss"))),
            Cell(fmt_percent(s.get("val_accuracy")), _sort_number(s.get("val_accuracy"))),
            Cell(fmt_bytes(s.get("peak_memory")), _sort_number(s.get("peak_memory"))),
            Cell(r.status, r.status, "Stopped before the end; its numbers cover the steps done."
                 if r.status == "cancelled" else ""),
        ]

    def _speedup_cell(self, r: RunResult, comparison: Comparison | None, letter: str) -> Cell:
        value = self.speedups.get(r.id)
        if comparison is None:
            tip = "Run the same setup on the CPU and another device to get a speedup."
        elif comparison.baseline is r:
            tip = f"The CPU baseline of comparison {letter}."
        elif comparison.baseline is None:
            tip = f"Comparison {letter} has no CPU run to divide by."
        else:
            tip = (f"{fmt_rate(r.summary.get('samples_per_s'))} / "
                   f"{fmt_rate(comparison.baseline.summary.get('samples_per_s'))} samples/s on the CPU.")
        return Cell(fmt_speedup(value), _sort_number(value), tip)

    @staticmethod
    def _machine_tooltip(r: RunResult) -> str:
        env = r.env
        parts = [r.machine]
        for key, label in (("os", "OS"), ("python", "Python"), ("torch", "PyTorch"), ("threads", "CPU threads")):
            if env.get(key) not in (None, ""):
                parts.append(f"{label} {env[key]}")
        if r.origin == "imported":
            parts.append("imported from a file")
        return " \u00b7 ".join(str(p) for p in parts)

    @staticmethod
    def _model_tooltip(r: RunResult) -> str:
        params = r.summary.get("parameters")
        return f"{params / 1e6:,.2f} M parameters" if is_finite(params) else ""

    @staticmethod
    def _settings_tooltip(r: RunResult) -> str:
        cfg = r.config
        length = f"{plural(cfg.steps, 'step')}" if cfg.steps else f"{plural(cfg.epochs or 0, 'epoch')}"
        flags = [name for name, on in (("channels-last", cfg.channels_last), ("torch.compile", cfg.compile),
                                       ("TF32", cfg.tf32), ("data on the device", cfg.resident)) if on]
        text = f"{cfg.precision}, {cfg.optimizer} lr {cfg.lr:g}, {length}, {cfg.mode}"
        return text + (f"; {', '.join(flags)}" if flags else "")

    @staticmethod
    def _rate_tooltip(r: RunResult) -> str:
        s = r.summary
        if not is_finite(s.get("samples_per_s")):
            return "No measurement window finished."
        q1, q3 = s.get("samples_per_s_q1"), s.get("samples_per_s_q3")
        windows = s.get("windows")
        text = "Median"
        if is_finite(windows):
            text += f" of {plural(int(windows), 'window')}"
        if is_finite(q1) and is_finite(q3):
            text += f"; middle half between {fmt_rate(q1)} and {fmt_rate(q3)} samples/s"
        return text + "."

    @staticmethod
    def _epoch_tooltip(r: RunResult) -> str:
        measured = [e for e in (r.summary.get("epoch_s") or []) if is_finite(e)]
        if not measured:
            return ""
        return "Measured epochs: " + ", ".join(fmt_seconds(e) for e in measured)


def fit_columns(table: QTableView, caps: dict[str, int] | None = None, padding: int = 10) -> None:
    """Columns as wide as their cells or header text plus some air (not the header's sort-arrow allowance,
    which would push the last columns off screen); long text columns are capped and elide."""
    header = table.horizontalHeader()
    fm = header.fontMetrics()
    for col in range(len(COLUMNS)):
        if table.isColumnHidden(col):
            continue
        title = COLUMNS[col].header
        width = max(table.sizeHintForColumn(col), fm.horizontalAdvance(title) + 12 if title else 20) + padding
        cap = (caps or {}).get(title)
        header.resizeSection(col, min(width, cap) if cap else width)


def _sort_number(v) -> float:
    """Missing values sort below every number."""
    return float(v) if is_finite(v) else -math.inf


class RunSortProxy(QSortFilterProxyModel):
    """Sorts by raw values (SORT_ROLE); optionally keeps only some runs, in a given order."""

    def __init__(self, parent=None, only: list[str] | None = None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self._order = {run_id: i for i, run_id in enumerate(only)} if only is not None else None

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:
        if self._order is None:
            return True
        run_id = self.sourceModel().index(source_row, 0, source_parent).data(RUN_ID_ROLE)
        return run_id in self._order

    def lessThan(self, left: QModelIndex, right: QModelIndex) -> bool:
        if self._order is not None:
            return self._order[left.data(RUN_ID_ROLE)] < self._order[right.data(RUN_ID_ROLE)]
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        if isinstance(a, float) and isinstance(b, float):
            return a < b
        return str(a) < str(b)


# -- the chart --------------------------------------------------------------------------------------------

class SpeedupChart(QWidget):
    """Bars of one comparison's speedups over the CPU (or its samples/s when it has no CPU run)."""

    def __init__(self, parent=None, show_title: bool = True):
        super().__init__(parent)
        self.show_title = show_title
        self.comparison: Comparison | None = None
        self.bars: pg.BarGraphItem | None = None
        self._labels: list[pg.TextItem] = []
        self._hint_text = NO_COMPARISON_HINT
        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(200)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setFrameShape(QFrame.Shape.StyledPanel)
        self.plot.getPlotItem().setContentsMargins(8, 8, 12, 8)
        self.hint = placeholder_label(NO_COMPARISON_HINT)
        self._stack = QStackedLayout(self)
        self._stack.addWidget(self.hint)
        self._stack.addWidget(self.plot)
        self._restyle()

    def show_comparison(self, comparison: Comparison | None, hint: str = NO_COMPARISON_HINT) -> None:
        self.comparison = comparison
        self._hint_text = hint
        self._draw()

    def heights(self) -> list[float]:
        return [] if self.bars is None else [float(h) for h in self.bars.opts["height"]]

    def is_showing_hint(self) -> bool:
        return self._stack.currentWidget() is self.hint

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()
            self._draw()
        super().changeEvent(event)

    def _restyle(self) -> None:
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        self.plot.setBackground(palette.color(QPalette.ColorRole.Base))
        for name in ("left", "bottom"):
            axis = self.plot.getAxis(name)
            axis_pen = QColor(text)
            axis_pen.setAlphaF(0.35)
            axis.setPen(pg.mkPen(axis_pen, width=1))
            axis.setTextPen(pg.mkPen(text))
            axis.setStyle(tickLength=0, maxTickLevel=0)

    def _draw(self) -> None:
        c = self.comparison
        item = self.plot.getPlotItem()
        item.clear()
        self.bars, self._labels = None, []
        if c is None:
            self.hint.setText(self._hint_text)
            self._stack.setCurrentWidget(self.hint)
            return
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        by_speedup = c.baseline is not None
        if by_speedup:
            values = [c.speedups.get(r.id) or 0.0 for r in c.runs]
            labels = [bar_label(v) for v in values]
        else:
            values = [float(r.summary.get("samples_per_s") or 0.0) for r in c.runs]
            labels = [f"{fmt_rate(v)}/s" for v in values]
        xs = list(range(len(values)))
        brushes = [pg.mkBrush(device_color(r.config.device, palette)) for r in c.runs]
        self.bars = pg.BarGraphItem(x=xs, height=values, width=0.5, brushes=brushes, pen=None)
        item.addItem(self.bars)
        top = max(values + [1.0]) * 1.2
        for x, v, label in zip(xs, values, labels):
            t = pg.TextItem(label, color=text, anchor=(0.5, 1.0))
            font = t.textItem.font()
            font.setBold(True)
            t.setFont(font)
            t.setPos(x, v + top * 0.015)
            item.addItem(t)
            self._labels.append(t)
        if by_speedup:
            dash = QColor(text)
            dash.setAlphaF(0.55)
            item.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen(dash, width=1, style=Qt.PenStyle.DashLine)))
        bottom = item.getAxis("bottom")
        bottom.setTicks([[(x, name) for x, name in zip(xs, device_labels(c))]])
        item.setLabel("left", f"speedup vs CPU ({TIMES})" if by_speedup else "samples/s (no CPU run)",
                      color=text.name())
        item.setTitle(comparison_title(c) if self.show_title else None, color=text.name(), size="12pt")
        slots = max(len(values), 4.5)  # a few devices still get slim bars
        item.setXRange((len(values) - 1) / 2 - slots / 2, (len(values) - 1) / 2 + slots / 2, padding=0)
        item.setYRange(0, top, padding=0)
        item.showGrid(x=False, y=True, alpha=0.15)
        self._stack.setCurrentWidget(self.plot)


# -- the picture of one comparison ------------------------------------------------------------------------

SHEET_HIDDEN = ("Comparison", "Time", "Model", "Dataset", "Batch", "Precision", "Status")


class ComparisonSheet(QWidget):
    """What the exported picture shows: the comparison's rows of the table and its chart."""

    def __init__(self, model: RunTableModel, comparison: Comparison, parent=None):
        super().__init__(parent)
        self.proxy = RunSortProxy(self, only=[r.id for r in comparison.runs])
        self.proxy.setSourceModel(model)
        self.proxy.sort(0)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setAlternatingRowColors(True)
        self.table.setShowGrid(False)
        self.table.verticalHeader().hide()
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for name in SHEET_HIDDEN:
            self.table.setColumnHidden(COL[name], True)
        fit_columns(self.table, padding=16)
        self.chart = SpeedupChart(show_title=False)
        self.chart.show_comparison(comparison)
        self.chart.setFixedHeight(300)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)
        layout.addWidget(self.table)
        layout.addWidget(self.chart)
        header = self.table.horizontalHeader()
        frame = 2 * self.table.frameWidth()
        table_width = header.length() + frame
        table_height = header.sizeHint().height() + self.table.verticalHeader().length() + frame
        self.table.setFixedHeight(table_height)
        self.resize(max(720, table_width), table_height + 16 + 300)


# -- the panel --------------------------------------------------------------------------------------------

class ResultsPanel(QWidget):
    """Every kept run in a sortable table, the speedup chart of the selected comparison, and exports."""

    message = Signal(str)
    selection_changed = Signal(list)

    def __init__(self, store: RunStore, parent=None):
        super().__init__(parent)
        self.store = store
        self._last_dir = str(Path.home())
        self.model = RunTableModel(self)
        self.proxy = RunSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = self._make_table()
        self.chart = SpeedupChart()
        self._make_actions()

        self.empty = placeholder_label("<b>No runs yet</b><br>Finished runs appear here and are kept between "
                                       "launches.<br>Import\u2026 adds runs exported from another machine.")
        table_area = QWidget()
        self._table_stack = QStackedLayout(table_area)
        self._table_stack.addWidget(self.empty)
        self._table_stack.addWidget(self.table)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(table_area)
        splitter.addWidget(self.chart)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([3000, 2000])  # scaled to the real height: the table gets three fifths

        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addWidget(self._button(self.delete_action))
        buttons.addStretch(1)
        for action in (self.import_action, self.csv_action, self.json_action, self.png_action):
            buttons.addWidget(self._button(action))

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(splitter, 1)
        layout.addLayout(buttons)

        self.table.installEventFilter(self)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.table.selectionModel().currentRowChanged.connect(lambda *_: self._update_chart())
        self.reload()

    # construction
    def _make_table(self) -> QTableView:
        table = QTableView()
        table.setModel(self.proxy)
        table.setSortingEnabled(True)
        table.sortByColumn(COL["Time"], Qt.SortOrder.DescendingOrder)
        table.setAlternatingRowColors(True)
        table.setShowGrid(False)
        table.setWordWrap(False)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        table.setItemDelegateForColumn(COL["Comparison"], GroupBadgeDelegate(table))
        table.verticalHeader().hide()
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
        header = table.horizontalHeader()
        header.setHighlightSections(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        table.customContextMenuRequested.connect(self._context_menu)
        return table

    def _make_actions(self) -> None:
        def action(text: str, tip: str, slot) -> QAction:
            a = QAction(text, self)
            a.setToolTip(tip)
            a.setStatusTip(tip)
            a.triggered.connect(slot)
            return a

        self.delete_action = action("Delete", "Remove the selected runs from the history.", self.delete_dialog)
        self.delete_action.setShortcuts([QKeySequence(QKeySequence.StandardKey.Delete),
                                         QKeySequence(Qt.Key.Key_Backspace)])
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.table.addAction(self.delete_action)
        self.csv_action = action("Export CSV\u2026", "Save the selected runs (all when none is selected) "
                                 "as a spreadsheet file.", self.export_csv_dialog)
        self.json_action = action("Export JSON\u2026", "Save the selected runs (all when none is selected) with "
                                  "every step, to import on another machine.", self.export_json_dialog)
        self.import_action = action("Import\u2026", "Add runs from a JSON file exported by MPS Studio, for "
                                    "example from a CUDA server.", self.import_dialog)
        self.png_action = action("Export comparison\u2026", "Save the selected comparison's table and chart as "
                                 "a PNG picture.", self.export_comparison_dialog)
        self.select_group_action = action("Select Comparison", "Select every run of this comparison.",
                                          self._select_current_group)

    def _button(self, action: QAction) -> QPushButton:
        b = QPushButton(action.text())
        b.setToolTip(action.toolTip())
        b.setAutoDefault(False)
        b.clicked.connect(action.trigger)
        action.changed.connect(lambda: b.setEnabled(action.isEnabled()))
        b.setEnabled(action.isEnabled())
        return b

    def eventFilter(self, watched, event) -> bool:
        """Delete and Backspace on the table delete the selected rows (after asking), also where the
        key reaches the table rather than the action's shortcut."""
        if (watched is self.table and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)
                and event.modifiers() in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)):
            self.delete_dialog()
            return True
        return super().eventFilter(watched, event)

    # data
    def reload(self) -> None:
        """Read every run from the store, keeping the selection."""
        keep = self.selected_ids()
        try:
            runs = self.store.all()
        except Exception as exc:  # a damaged row must not take the window down
            self.message.emit(f"The run history could not be read ({exc.__class__.__name__}); "
                              "earlier runs are not shown.")
            runs = []
        self._set_runs(runs, keep)

    def add_result(self, result: RunResult) -> None:
        """A run that just ended (already saved): add or replace its row, refresh comparisons, select it."""
        runs = [r for r in self.model.runs() if r.id != result.id] + [result]
        self._set_runs(runs, [result.id])

    def results(self) -> list[RunResult]:
        return self.model.runs()

    def comparisons(self) -> list[Comparison]:
        return list(self.model.comparisons)

    def _set_runs(self, runs: list[RunResult], select: list[str]) -> None:
        self.model.set_runs(runs)
        self._table_stack.setCurrentWidget(self.table if runs else self.empty)
        self._fit_columns()
        self.select_ids([i for i in select if self.model.row_of(i) is not None])
        self._update_actions()
        self._update_chart()

    def _fit_columns(self) -> None:
        self.table.resizeColumnsToContents()
        header = self.table.horizontalHeader()
        fit_columns(self.table, caps={"Machine": 200, "Dataset": 160, "Model": 160})

    # selection
    def selected_ids(self) -> list[str]:
        rows = sorted(self.table.selectionModel().selectedRows(), key=lambda i: i.row())
        return [i.data(RUN_ID_ROLE) for i in rows]

    def select_ids(self, ids: list[str]) -> None:
        selection = QItemSelection()
        first = None
        for run_id in ids:
            row = self.model.row_of(run_id)
            if row is None:
                continue
            left = self.proxy.mapFromSource(self.model.index(row, 0))
            right = self.proxy.mapFromSource(self.model.index(row, len(COLUMNS) - 1))
            selection.select(left, right)
            if first is None:
                first = left
        sm = self.table.selectionModel()
        sm.select(selection, QItemSelectionModel.SelectionFlag.ClearAndSelect
                  | QItemSelectionModel.SelectionFlag.Rows)
        if first is not None:
            sm.setCurrentIndex(first, QItemSelectionModel.SelectionFlag.NoUpdate)
            self.table.scrollTo(first)

    def current_comparison(self) -> Comparison | None:
        """The comparison of the current row; with nothing selected, the newest comparison."""
        run = self._current_run()
        if run is not None:
            return self.model.comparison_of.get(run.id)
        if not self.model.comparisons:
            return None
        return max(self.model.comparisons, key=lambda c: max(r.created_at for r in c.runs))

    def _current_run(self) -> RunResult | None:
        ids = self.selected_ids()
        if not ids:
            return None
        current = self.table.selectionModel().currentIndex()
        run_id = current.data(RUN_ID_ROLE) if current.isValid() else None
        if run_id not in ids:
            run_id = ids[0]
        return self.model.run_at(self.model.row_of(run_id))

    def _on_selection_changed(self, *_):
        self._update_actions()
        self._update_chart()
        self.selection_changed.emit(self.selected_ids())

    def _update_chart(self) -> None:
        run = self._current_run()
        hint = NO_COMPARISON_HINT
        if run is not None and run.status != "finished":
            hint = f"This run {run.status}; only finished runs are compared"
        self.chart.show_comparison(self.current_comparison(), hint)

    def _update_actions(self) -> None:
        has_runs = self.model.rowCount() > 0
        self.delete_action.setEnabled(bool(self.selected_ids()))
        self.csv_action.setEnabled(has_runs)
        self.json_action.setEnabled(has_runs)
        self.png_action.setEnabled(self.current_comparison() is not None)

    def _select_current_group(self) -> None:
        c = self.current_comparison()
        if c is not None:
            self.select_ids([r.id for r in c.runs])

    # actions without questions (tests call these)
    def delete_selected(self) -> None:
        """Remove the selected runs from the history and the table; asks nothing (the button asks)."""
        ids = self.selected_ids()
        if not ids:
            return
        self.store.delete(ids)
        gone = set(ids)
        self._set_runs([r for r in self.model.runs() if r.id not in gone], [])
        self.message.emit(f"Deleted {plural(len(ids), 'run')}.")

    def _runs_for(self, ids: list[str] | None) -> list[RunResult]:
        wanted = ids if ids is not None else self.selected_ids()
        if not wanted:
            return self.model.runs()
        rows = [self.model.row_of(i) for i in wanted]
        return [self.model.run_at(r) for r in rows if r is not None]

    def export_csv(self, path: str, ids: list[str] | None = None) -> int:
        """Write runs (ids; None = the selection, or all) to CSV with the table's speedups; returns runs written."""
        runs = self._runs_for(ids)
        try:
            engine_results.export_csv(runs, path, speedups=self.model.speedups)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(len(runs), 'run')} to {Path(path).name}.")
        return len(runs)

    def export_json(self, path: str, ids: list[str] | None = None) -> int:
        """Write runs with every step and their comparisons to JSON, for import elsewhere; returns runs written."""
        runs = self._runs_for(ids)
        try:
            engine_results.export_json(runs, path, [c.to_dict() for c in compare(runs)])
        except OSError as exc:
            self.message.emit(f"{Path(path).name} cannot be written ({exc.strerror or exc.__class__.__name__}); "
                              "choose another folder.")
            return 0
        self.message.emit(f"Exported {plural(len(runs), 'run')} to {Path(path).name}.")
        return len(runs)

    def import_json(self, path: str) -> int:
        """Add runs from an MPS Studio JSON file; runs already in the history stay as they are."""
        try:
            runs = engine_results.import_json(path)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        known = {r.id for r in self.model.runs()}
        new = [r for r in runs if r.id not in known]
        for r in new:
            self.store.save(r)
        self.reload()
        self.select_ids([r.id for r in new])
        skipped = len(runs) - len(new)
        note = f" ({plural(skipped, 'run')} already in the history)" if skipped else ""
        self.message.emit(f"Imported {plural(len(new), 'run')} from {Path(path).name}{note}.")
        return len(new)

    def export_comparison_png(self, path: str, scale: float | None = None) -> str:
        """Save the current comparison's rows and chart as a PNG with a title; returns the path.

        Raises UserError (one sentence) when no comparison is selected or the file cannot be written.
        """
        c = self._require_comparison()
        title, subtitle = self.comparison_title()
        sheet = ComparisonSheet(self.model, c)
        sheet.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
        sheet.show()
        try:
            out = render_png(sheet, path, title, subtitle, scale)
        finally:
            sheet.close()
            sheet.deleteLater()
        self.message.emit(f"Saved comparison {self.model.letter_of(c)} to {Path(path).name}.")
        return out

    def comparison_title(self) -> tuple[str, str]:
        """Title and subtitle of the current comparison for pictures, e.g.
        ("resnet18 on cifar10 \u00b7 batch 128 \u00b7 fp32", "21 Nov 2026 \u00b7 Apple M2 Pro, macOS 14.5")."""
        c = self._require_comparison()
        newest = max(r.created_at for r in c.runs)
        dt = local_time(newest)
        date = f"{dt.day} {dt:%b %Y}" if dt else newest[:10]
        machines = list(dict.fromkeys(r.machine for r in c.runs))
        return comparison_title(c, " \u00b7 "), f"{date} \u00b7 {' + '.join(machines)}"

    def _require_comparison(self) -> Comparison:
        c = self.current_comparison()
        if c is None:
            raise UserError("Select a run that belongs to a comparison first; run the same setup on two devices "
                            "to make one.")
        return c

    # actions with questions (buttons, menu, keys)
    def delete_dialog(self) -> None:
        """Delete (button, menu, Delete/Backspace key): asks first, because deleted runs are gone for good."""
        ids = self.selected_ids()
        if ids and self.confirm_delete(len(ids)):
            self.delete_selected()

    def confirm_delete(self, count: int) -> bool:
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setText(f"Delete {plural(count, 'run')}?" if count > 1 else "Delete this run?")
        box.setInformativeText("Deleted runs are removed from the history for good; export them first "
                               "to keep a copy.")
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        return box.clickedButton() is delete

    def _save_path(self, caption: str, name: str, filters: str, suffix: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self, caption, str(Path(self._last_dir) / name), filters)
        if not path:
            return ""
        if not path.lower().endswith(suffix):
            path += suffix
        self._last_dir = str(Path(path).parent)
        return path

    def export_csv_dialog(self) -> None:
        path = self._save_path("Export Runs as CSV", "mpsstudio-runs.csv", "CSV files (*.csv)", ".csv")
        if path:
            self.export_csv(path)

    def export_json_dialog(self) -> None:
        path = self._save_path("Export Runs as JSON", "mpsstudio-runs.json", "JSON files (*.json)", ".json")
        if path:
            self.export_json(path)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import Runs", self._last_dir,
                                              "MPS Studio runs (*.json);;All files (*)")
        if path:
            self._last_dir = str(Path(path).parent)
            self.import_json(path)

    def export_comparison_dialog(self) -> None:
        c = self.current_comparison()
        name = "comparison.png"
        if c is not None:
            cfg = c.config
            name = f"{cfg.model}-{cfg.dataset}-batch{cfg.batch_size}-{cfg.precision}.png"
        path = self._save_path("Export Comparison as PNG", name, "PNG images (*.png)", ".png")
        if path:
            try:
                self.export_comparison_png(path)
            except UserError as exc:
                self.message.emit(str(exc))

    def _context_menu(self, pos) -> None:
        menu = QMenu(self)
        has_group = self.current_comparison() is not None and bool(self.selected_ids())
        self.select_group_action.setEnabled(has_group)
        menu.addAction(self.select_group_action)
        menu.addSeparator()
        for a in (self.csv_action, self.json_action, self.png_action, self.import_action):
            menu.addAction(a)
        menu.addSeparator()
        menu.addAction(self.delete_action)
        menu.exec(self.table.viewport().mapToGlobal(pos))
