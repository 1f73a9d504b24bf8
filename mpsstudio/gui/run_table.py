"""The results table: runs as rows, the engine's result columns (engine/columns.py) as columns, a sort proxy.

Cells are formatted once per change, so sorting and painting stay cheap; numbers come from the engine's
summaries and speedups and are only formatted here, never computed.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from datetime import datetime

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QRectF, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QTableView

from ..engine.analysis import energy
from ..engine.analysis import stability
from ..engine.history.columns import BY_KEY, TABLE_COLUMNS, cell_text
from ..engine.analysis.compare import Comparison, compare, speedup_map
from ..engine.basics.formatting import fmt_count, fmt_duration, fmt_rate, fmt_ratio, is_finite, local_time, plural
from ..engine.basics.results import RunResult
from .style import group_color, warning_color

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
RUN_ID_ROLE = Qt.ItemDataRole.UserRole + 2


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    tooltip: str
    numeric: bool = False


COLUMNS = (
    Column("state", "", "How the run ended: \u2713 finished, \u2715 failed, \u25a0 stopped (cancelled); \u26a0 finished "
           "but its numbers were noisy."),
    Column("comparison", "", "Comparison: runs with the same letter share every setting but the device."),
    *(Column(k, BY_KEY[k].title, BY_KEY[k].tooltip, BY_KEY[k].numeric) for k in TABLE_COLUMNS),
    Column("note", BY_KEY["note"].title, BY_KEY["note"].tooltip),
)
COL = {c.header or c.key.capitalize(): i for i, c in enumerate(COLUMNS)}
# Hidden until the user shows them (right-click a column header): the table fits a 1280-pixel-wide window.
DEFAULT_HIDDEN = ("Precision", "Warm-up", "Final loss", "Status")
STATE_GLYPHS = {"finished": "\u2713", "failed": "\u2715", "cancelled": "\u25a0"}
STATE_WORDS = {"finished": "Finished", "failed": "Failed", "cancelled": "Stopped before the end (cancelled)"}


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


@dataclass
class Cell:
    text: str
    sort: object
    tooltip: str = ""


class RunTableModel(QAbstractTableModel):
    """Runs as rows. A row's cells are formatted when first shown and a column's sort keys when first sorted by,
    then kept until the runs change: a history of 10,000 runs opens without formatting rows nobody sees."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._runs: list[RunResult] = []
        self._cells: list[list[Cell] | None] = []
        self._sort_keys: dict[int, list] = {}
        self._search: list[str | None] = []
        self._sort_spec = (COL["Time"], Qt.SortOrder.DescendingOrder)  # newest first until a header is clicked
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
        self.speedups = speedup_map(self.comparisons)
        self._cells = [None] * len(self._runs)
        self._search = [None] * len(self._runs)
        self._sort_keys = {}
        self._apply_sort()
        self.endResetModel()

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        """Sort the rows here, in Python, by the column's raw keys: ~10 ms for 10,000 runs, where Qt's proxy
        sort asks data() ~150,000 times. The view's selection follows its rows."""
        if not 0 <= column < len(COLUMNS):
            return
        self._sort_spec = (column, order)
        self.layoutAboutToBeChanged.emit()
        before = self.persistentIndexList()
        moved = self._apply_sort()
        self.changePersistentIndexList(before, [self.index(moved[i.row()], i.column()) for i in before])
        self.layoutChanged.emit()

    def _apply_sort(self) -> list[int]:
        """Reorder the rows by the current sort; returns each old row's new row."""
        column, order = self._sort_spec
        keys = [self._sort_key(i, column) for i in range(len(self._runs))]
        new_order = sorted(range(len(self._runs)), key=keys.__getitem__,
                           reverse=order == Qt.SortOrder.DescendingOrder)
        self._runs = [self._runs[i] for i in new_order]
        self._cells = [self._cells[i] for i in new_order]
        self._search = [self._search[i] for i in new_order]
        self._sort_keys = {c: [k[i] for i in new_order] for c, k in self._sort_keys.items()}
        self._row_of = {r.id: i for i, r in enumerate(self._runs)}
        moved = [0] * len(new_order)
        for new, old in enumerate(new_order):
            moved[old] = new
        return moved

    def _row_cells(self, row: int) -> list[Cell]:
        cells = self._cells[row]
        if cells is None:
            cells = self._cells[row] = self._format(self._runs[row])
        return cells

    def _sort_key(self, row: int, col: int):
        keys = self._sort_keys.get(col)
        if keys is None:
            keys = self._sort_keys[col] = [self._sort_value(r, COLUMNS[col].key) for r in self._runs]
        return keys[row]

    def _sort_value(self, r: RunResult, key: str):
        """What a column sorts by: the raw number (missing below every number), or lower-case text."""
        if key == "comparison":
            return self.letter_of(self.comparison_of.get(r.id)) or "~"
        if key == "state":
            return r.status
        if key == "note":
            return r.note.lower()
        if key == "time":
            dt = local_time(r.created_at)
            return dt.timestamp() if dt else 0.0
        if key == "machine":
            return (r.machine + (" (imported)" if r.origin == "imported" else "")).lower()
        column = BY_KEY[key]
        value = column.value(r, self.speedups)
        return _sort_number(value) if column.numeric else str(value).lower()

    def runs(self) -> list[RunResult]:
        return list(self._runs)

    def set_note(self, row: int, text: str) -> None:
        self._runs[row].note = text
        self._cells[row] = None
        self._search[row] = None
        self._sort_keys.pop(COL["Note"], None)
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    def search_text(self, row: int) -> str:
        """What the filter box searches: model, dataset, device, machine, precision, status and note."""
        text = self._search[row]
        if text is None:
            r = self._runs[row]
            c = r.config
            text = self._search[row] = " ".join(
                (c.model, c.dataset, c.device, r.machine, c.precision, r.status, r.note,
                 "imported" if r.origin == "imported" else "", "noisy" if r.summary.get("stability") == "noisy"
                 else "")).lower()
        return text

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
        run = self._runs[row]
        if role == SORT_ROLE:
            return self._sort_key(row, col)
        if role == RUN_ID_ROLE:
            return run.id
        cell = self._row_cells(row)[col]
        if role == Qt.ItemDataRole.DisplayRole:
            return cell.text
        if role == Qt.ItemDataRole.ToolTipRole:
            if run.status == "failed" and run.error and col != COL["State"]:
                return run.error
            return cell.tooltip or None
        if role == Qt.ItemDataRole.AccessibleTextRole and col == COL["State"]:
            return cell.tooltip
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if col in (COL["Comparison"], COL["State"]):
                return int(Qt.AlignmentFlag.AlignCenter)
            return int((Qt.AlignmentFlag.AlignRight if COLUMNS[col].numeric else Qt.AlignmentFlag.AlignLeft)
                       | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and col == COL["State"]:
            palette = QApplication.palette()
            if run.status == "failed":
                return warning_color(palette)
            if run.status == "cancelled":
                return palette.color(QPalette.ColorRole.PlaceholderText)
            return QColor("#c77c02") if cell.text.startswith("\u26a0") else QColor("#248a3d")  # Apple's orange, green
        if role == Qt.ItemDataRole.ForegroundRole and col == COL["Status"] and run.status != "finished":
            palette = QApplication.palette()
            if run.status == "failed":
                return warning_color(palette)
            return palette.color(QPalette.ColorRole.PlaceholderText)
        return None

    # formatting one run into cells
    def _format(self, r: RunResult) -> list[Cell]:
        s = r.summary
        comparison = self.comparison_of.get(r.id)
        letter = self.letter_of(comparison)
        cells = {}
        for key in TABLE_COLUMNS:  # the engine's value, formatted the engine's way, sorted by the raw number
            column = BY_KEY[key]
            value = column.value(r, self.speedups)
            sort = _sort_number(value) if column.numeric else str(value).lower()
            cells[key] = Cell(cell_text(key, r, self.speedups), sort)
        dt = local_time(r.created_at)
        cells["time"] = Cell(fmt_time(r.created_at), dt.timestamp() if dt else 0.0,
                             f"{dt:%A %d %B %Y, %H:%M:%S}" if dt else r.created_at)
        machine = r.machine + (" (imported)" if r.origin == "imported" else "")
        cells["machine"] = Cell(machine, machine.lower(), self._machine_tooltip(r))
        cells["device"].tooltip = str(r.env.get("device_name") or "")
        cells["model"].tooltip = self._model_tooltip(r)
        cells["dataset"].tooltip = str(s.get("dataset") or "")
        cells["precision"].tooltip = self._settings_tooltip(r)
        spread = stability.spread(s)
        if spread is not None:
            cells["samples_per_s"].text += f" \u00b1{50 * spread:.0f} %"  # half the IQR, relative to the median
        if s.get("stability") == "noisy":
            cells["samples_per_s"].text = "\u26a0\ufe0e " + cells["samples_per_s"].text
        cells["samples_per_s"].tooltip = self._rate_tooltip(r)
        cells["speedup_vs_cpu"].tooltip = self._speedup_tooltip(r, comparison, letter)
        entry = comparison.entry_of(r) if comparison else None
        if entry is not None and not entry.is_baseline and entry.low is not None and r.id not in entry.round_speedups:
            cells["speedup_vs_cpu"].text += f" ({fmt_ratio(entry.low)}\u2013{fmt_ratio(entry.high)})"
        if s.get("warmup_steps"):
            cells["warmup_s"].tooltip = plural(int(s["warmup_steps"]), "warm-up step")
        cells["s_per_epoch"].tooltip = self._epoch_tooltip(r)
        cells["j_per_sample"].tooltip = self._energy_tooltip(r)
        if r.status == "cancelled":
            cells["status"].tooltip = "Stopped before the end; its numbers cover the steps done."
        noisy = r.status == "finished" and s.get("stability") == "noisy"
        state_tip = STATE_WORDS.get(r.status, r.status) + (f"; noisy: {s.get('stability_reason')}" if noisy else "")
        if r.status == "failed" and r.error:
            state_tip += f": {r.error}"
        state = Cell("\u26a0\ufe0e" if noisy else STATE_GLYPHS.get(r.status, "?"), r.status, state_tip)
        badge = Cell(letter, letter or "~",
                     f"Comparison {letter}: {comparison.title()} on {plural(len(comparison.runs), 'device')}."
                     if comparison else "Not compared: no finished run of the same setup on another device.")
        note = Cell(r.note.replace("\n", " "), r.note.lower(), r.note)
        return [state, badge, *(cells[k] for k in TABLE_COLUMNS), note]

    @staticmethod
    def _energy_tooltip(r: RunResult) -> str:
        """What the J/sample figure is (source, power, busy share), or why the cell is empty."""
        s = r.summary
        lines = [energy.describe(s)]
        if is_finite(s.get("energy_j")):
            lines.append(f"{energy.fmt_joules(s['energy_j'])} over the measurement windows.")
        if is_finite(s.get("utilization")):
            what = "GPU busy" if s.get("utilization_measure") == "gpu_busy" else "CPU busy (share of all cores)"
            lines.append(f"{what}: {s['utilization']:.0f} % of the measured time.")
        return "\n".join(lines)

    def _speedup_tooltip(self, r: RunResult, comparison: Comparison | None, letter: str) -> str:
        if comparison is None:
            return "Run the same setup on the CPU and another device to get a speedup."
        entry = comparison.entry_of(r)
        if entry is None or entry.baseline is None:
            return (f"Comparison {letter} has no CPU run from {r.machine} to divide by (another machine's CPU "
                    "would not be a fair baseline).")
        if entry.is_baseline:
            return f"The CPU baseline of comparison {letter} on {r.machine}."
        text = (f"{fmt_rate(r.summary.get('samples_per_s'))} / "
                f"{fmt_rate(entry.baseline.summary.get('samples_per_s'))} samples/s on the same machine's CPU.")
        if entry.low is not None and entry.high is not None:
            how = "95 % interval" if entry.method == "bootstrap" else "range of the paired rounds"
            text += f"\n{how}: {entry.low:.2f}\u2013{entry.high:.2f}\u00d7"
            if entry.unclear():
                text += " (contains 1.00: no clear difference)"
        return text

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
        return f"{fmt_count(params)} parameters" if is_finite(params) else ""

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
            text += f"; middle half between {fmt_rate(q1)} and {fmt_rate(q3)} samples/s (\u00b1 shows half of it)"
        text += "."
        if s.get("stability") == "noisy":
            text += f"\nNoisy: {s.get('stability_reason')}. Treat this number with care."
        elif s.get("stability") == "stable":
            text += "\nStable: window throughputs within 10 % (IQR / median), the machine was quiet."
        return text

    @staticmethod
    def _epoch_tooltip(r: RunResult) -> str:
        text = BY_KEY["s_per_epoch"].tooltip
        measured = [e for e in (r.summary.get("epoch_s") or []) if is_finite(e)]
        if measured:
            text += " Measured epochs: " + ", ".join(fmt_duration(e) for e in measured) + "."
        return text


def fit_columns(table: QTableView, caps: dict[str, int] | None = None, padding: int = 10) -> None:
    """Columns as wide as their cells or header text plus some air (not the header's sort-arrow allowance,
    which would push the last columns off screen); long text columns are capped and elide."""
    header = table.horizontalHeader()
    fm = header.fontMetrics()
    for col in range(len(COLUMNS)):
        if table.isColumnHidden(col):
            continue
        title = COLUMNS[col].header
        if COLUMNS[col].key == "state":
            header.resizeSection(col, fm.horizontalAdvance("\u2713") + 18)
            continue
        width = max(table.sizeHintForColumn(col), fm.horizontalAdvance(title) + 12 if title else 20) + padding
        cap = (caps or {}).get(title)
        header.resizeSection(col, min(width, cap) if cap else width)


def _sort_number(v) -> float:
    """Missing values sort below every number."""
    return float(v) if is_finite(v) else -math.inf


class RunSortProxy(QSortFilterProxyModel):
    """The table's view of the model: it filters (set_filter), and hands sorting to the model (RunTableModel.sort,
    by raw keys: a float per numeric column, lower-case text otherwise), which keeps the rows in that order."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        self.sourceModel().sort(column, order)

    _words: tuple[str, ...] = ()

    def set_words(self, text: str) -> None:
        """Keep the runs whose search text (RunTableModel.search_text) holds every word of `text`."""
        words = tuple(text.lower().split())
        if words == self._words:
            return
        if hasattr(self, "endFilterChange"):  # Qt 6.9 and later (invalidateFilter is deprecated there)
            self.beginFilterChange()
            self._words = words
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._words = words
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:  # noqa: N802 (Qt API)
        if not self._words:
            return True
        text = self.sourceModel().search_text(source_row)
        return all(w in text for w in self._words)


class ComparisonProxy(QSortFilterProxyModel):
    """Only the given runs, in the given order (the rows of one comparison)."""

    def __init__(self, parent=None, only: list[str] = ()):
        super().__init__(parent)
        self._order = {run_id: i for i, run_id in enumerate(only)}

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:
        run_id = self.sourceModel().index(source_row, 0, source_parent).data(RUN_ID_ROLE)
        return run_id in self._order

    def lessThan(self, left: QModelIndex, right: QModelIndex) -> bool:
        return self._order[left.data(RUN_ID_ROLE)] < self._order[right.data(RUN_ID_ROLE)]
