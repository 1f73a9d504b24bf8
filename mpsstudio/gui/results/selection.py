"""What the results panel has selected and what it compares: the selected runs (by id, whatever the sort and filter),
the current run and comparison (RunSelection), and the Compare menu over the engine's comparisons by what differs
and its scalings over GPUs (ComparePicker)."""

from __future__ import annotations

from PySide6.QtCore import QItemSelection, QItemSelectionModel, QObject, QSortFilterProxyModel, Signal
from PySide6.QtWidgets import QComboBox, QTableView, QWidget

from ...engine.analysis.compare import Comparison
from ...engine.basics.formatting import instant
from ...engine.basics.results import RunResult
from ..style import labelled_row
from .run_table import COLUMNS, RUN_ID_ROLE, RunTableModel

AXIS_WORDS = {"batch_size": "batch size", "threads": "CPU threads", "accumulate": "gradient accumulation",
              "finetune": "fine-tuning"}


class RunSelection:
    """The table's selection as runs: `model` holds them, `proxy` sorts and filters them, `table` shows them."""

    def __init__(self, model: RunTableModel, proxy: QSortFilterProxyModel, table: QTableView) -> None:
        self.model, self.proxy, self.table = model, proxy, table

    def ids(self) -> list[str]:
        rows = sorted(self.table.selectionModel().selectedRows(), key=lambda i: i.row())
        return [i.data(RUN_ID_ROLE) for i in rows]

    def select(self, ids: list[str]) -> None:
        """Select these runs' rows (one range per run of adjacent rows: thousands of ids stay fast)."""
        first = None
        rows = []
        for run_id in ids:
            row = self.model.row_of(run_id)
            if row is None:
                continue
            index = self.proxy.mapFromSource(self.model.index(row, 0))
            first = first or index
            rows.append(index.row())
        selection = QItemSelection()
        last_column = len(COLUMNS) - 1
        rows.sort()
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i] != rows[i - 1] + 1:
                selection.select(self.proxy.index(rows[start], 0), self.proxy.index(rows[i - 1], last_column))
                start = i
        sm = self.table.selectionModel()
        sm.select(selection, QItemSelectionModel.SelectionFlag.ClearAndSelect
                  | QItemSelectionModel.SelectionFlag.Rows)
        if first is not None:
            sm.setCurrentIndex(first, QItemSelectionModel.SelectionFlag.NoUpdate)
            self.table.scrollTo(first)

    def visible_ids(self) -> list[str]:
        return [self.proxy.index(r, 0).data(RUN_ID_ROLE) for r in range(self.proxy.rowCount())]

    def current_run(self) -> RunResult | None:
        """The current row's run where it is selected, else the first selected; None with nothing selected."""
        ids = self.ids()
        if not ids:
            return None
        current = self.table.selectionModel().currentIndex()
        run_id = current.data(RUN_ID_ROLE) if current.isValid() else None
        if run_id not in ids:
            run_id = ids[0]
        row = self.model.row_of(run_id)
        return self.model.run_at(row) if row is not None else None

    def current_comparison(self) -> Comparison | None:
        """The comparison of the current row; with nothing selected, the newest comparison."""
        run = self.current_run()
        if run is not None:
            return self.model.comparison_of.get(run.id)
        if not self.model.comparisons:
            return None
        return max(self.model.comparisons, key=lambda c: max(instant(r.created_at) for r in c.runs))

    def runs(self, ids: list[str] | None = None) -> list[RunResult]:
        """These runs as the table holds them (None: the selection, or every run where none is selected); a summary
        keeps the windows' samples/s an interval needs."""
        wanted = ids if ids is not None else self.ids()
        if not wanted:
            return self.model.runs()
        rows = [self.model.row_of(i) for i in wanted]
        return [self.model.run_at(r) for r in rows if r is not None]


class ComparePicker(QObject):
    """The Compare menu above the chart: the current run's devices, the selected runs, its scaling over GPUs, its
    environments or one setting (engine analysis/compare.py, contrast.py, scaling.py). What the user picks stays for
    the selection; `chosen` when they pick. `baseline_id`: the run the user chose to compare against."""

    chosen = Signal()

    def __init__(self, selection: RunSelection, parent: QWidget) -> None:
        super().__init__(parent)
        self._selection = selection
        self.baseline_id: str | None = None
        self._choices: dict[str, object] = {}
        self._compared: tuple[str, ...] | None = None  # the selection the user's choice is for
        self._user_choice: str | None = None
        self.combo = QComboBox()
        self.combo.setToolTip("Compare the current run with the same setup on other devices, with runs that differ "
                              "in one setting or in their environment, or the selected runs.")
        self.combo.activated.connect(self._picked)
        self.bar = labelled_row("Compare:", self.combo)

    def fill(self, run: RunResult | None) -> None:
        """The choices for the current run, keeping the user's for this selection, else the best default."""
        from ...engine.analysis.scaling import world_of

        choices = self._choices_for(run)
        selection = tuple(self._selection.ids())
        if selection != self._compared:  # another selection: the defaults again
            self._compared, self._user_choice = selection, None
        previous = self._user_choice or self.combo.currentData()
        self.combo.blockSignals(True)
        self.combo.clear()
        for label, key, _ in choices:
            self.combo.addItem(label, key)
        self._choices = {key: what for _, key, what in choices}
        keys = [key for _, key, _ in choices]
        if self._user_choice in keys:  # what the user picked for this selection stays
            self.combo.setCurrentIndex(keys.index(self._user_choice))
        elif "scaling" in keys and previous != "selected" and run is not None and world_of(run) > 1:
            self.combo.setCurrentIndex(keys.index("scaling"))  # a run on several GPUs: its scaling first
        elif previous in keys and not (previous == "devices" and "selected" in keys):
            self.combo.setCurrentIndex(keys.index(previous))
        elif "selected" in keys:
            self.combo.setCurrentIndex(keys.index("selected"))
        self.combo.blockSignals(False)
        self.bar.setVisible(len(choices) > 1 or (len(choices) == 1 and keys[0] != "devices"))

    def _choices_for(self, run: RunResult | None) -> list[tuple[str, str, object]]:
        """(label, key, what to show): devices, the selection, the scaling, the environments, one setting."""
        from ...engine.analysis import contrast

        model = self._selection.model
        out: list[tuple[str, str, object]] = []
        if run is not None and model.comparison_of.get(run.id) is not None:
            out.append(("Devices (speedup over each machine's CPU)", "devices", None))
        ids = self._selection.ids()
        if len(ids) >= 2:
            runs = self._selection.runs(ids)
            if len(runs) >= 2:
                out.append((f"The {len(runs)} selected runs", "selected", ("selected", [r.id for r in runs])))
        if run is not None and self._scaling_of(run) is not None:
            out.append(("GPUs (scaling)", "scaling", ("scaling",)))
        if run is not None:
            for c in contrast.contrasts(model.runs(), containing=run.id):
                label = ("Environments (torch, macOS, machine…)" if c.kind == "environment"
                         else f"Settings: {AXIS_WORDS.get(c.axis, contrast.SETTING_AXES.get(c.axis, c.axis))}")
                out.append((label, f"{c.kind}:{c.axis}", (c.kind, c.axis)))
        return out

    def _scaling_of(self, run: RunResult):
        """The scaling over GPUs the run belongs to (engine analysis/scaling.py), None when it belongs to none."""
        from ...engine.analysis import scaling

        if run.status != "finished":
            return None
        return next((s for s in scaling.scalings(self._selection.model.runs()) if run.id in {r.id for r in s.runs}),
                    None)

    def shown_scaling(self):
        """The scaling the menu shows, None when it shows something else."""
        if self.combo.currentData() != "scaling":
            return None
        run = self._selection.current_run()
        return self._scaling_of(run) if run is not None else None

    def shown_contrast(self):
        """The comparison by what differs the menu shows (None: the devices' chart)."""
        from ...engine.analysis import contrast

        what = self._choices.get(self.combo.currentData())
        if not isinstance(what, tuple) or what[0] == "scaling":
            return None
        run = self._selection.current_run()
        if what[0] == "selected":
            runs = self._selection.runs(what[1])
            if len(runs) < 2:  # deleted meanwhile
                return None
            return contrast.of_runs(runs, next((r for r in runs if r.id == self.baseline_id), None))
        kind, axis = what
        found = contrast.contrasts(self._selection.model.runs(), self.baseline_id,
                                   containing=run.id if run else None)
        return next((c for c in found if c.kind == kind and c.axis == axis), None)

    def _picked(self, _index: int) -> None:
        self._user_choice = self.combo.currentData()
        self.chosen.emit()
