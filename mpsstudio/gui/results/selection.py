"""The results panel's selection, filter and chart."""

from __future__ import annotations

from PySide6.QtCore import QItemSelection, QItemSelectionModel

from ...engine.analysis.compare import Comparison
from ...engine.basics.results import RunResult
from .run_table import COLUMNS, RUN_ID_ROLE
from .speedup_chart import NO_COMPARISON_HINT

AXIS_WORDS = {"batch_size": "batch size", "threads": "CPU threads", "accumulate": "gradient accumulation",
              "finetune": "fine-tuning"}


class SelectionMixin:
    """What is selected and shown: the selected runs (by id, whatever the sort and filter), the current comparison and its chart, the filter, and the Details tab's run."""

    def selected_ids(self) -> list[str]:
        rows = sorted(self.table.selectionModel().selectedRows(), key=lambda i: i.row())
        return [i.data(RUN_ID_ROLE) for i in rows]

    def select_ids(self, ids: list[str]) -> None:
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

    def _update_chart(self, *_) -> None:
        run = self._current_run()
        hint = NO_COMPARISON_HINT
        if run is not None and run.status != "finished":
            what = {"cancelled": "was stopped before the end", "interrupted": "was interrupted"}.get(run.status,
                                                                                                    run.status)
            hint = f"This run {what}; only finished runs are compared"
        self._fill_compare_choices(run)
        scaling = self.shown_scaling()
        shown = self.shown_contrast() if scaling is None else None
        if scaling is not None:
            self._chart_stack.setCurrentWidget(self.scaling_chart)
            self.scaling_chart.show_scaling(scaling)
        elif shown is not None:
            self._chart_stack.setCurrentWidget(self.contrast_chart)
            self.contrast_chart.show_contrast(shown)
        else:
            self._chart_stack.setCurrentWidget(self.chart)
        self.chart.show_comparison(self.current_comparison(), hint)  # kept current, shown or not
        if hasattr(self, "report_action"):  # what a report would be of changed with the chart
            self.report_action.setEnabled(self.report_parts_available())
            self.markdown_action.setEnabled(self.report_parts_available())
        if run is None:
            self.details.show_run(None)
        elif self.details.run is None or self.details.run.id != run.id:
            whole = self.whole_runs([run.id])
            self.details.show_run(whole[0] if whole else None)

    # comparisons by what differs (engine analysis/contrast.py)
    def _contrast_choices(self, run: RunResult | None) -> list[tuple[str, str, object]]:
        """(label, key, what to show) for the Compare menu: devices, the environments, one setting, the selection."""
        from ...engine.analysis import contrast

        out: list[tuple[str, str, object]] = []
        if run is not None and self.model.comparison_of.get(run.id) is not None:
            out.append(("Devices (speedup over each machine's CPU)", "devices", None))
        ids = self.selected_ids()
        if len(ids) >= 2:
            runs = self.whole_or_summary(ids)
            if len(runs) >= 2:
                out.append((f"The {len(runs)} selected runs", "selected", ("selected", [r.id for r in runs])))
        if run is not None and self._scaling_of(run) is not None:
            out.append(("GPUs (scaling)", "scaling", ("scaling",)))
        if run is not None:
            for c in contrast.contrasts(self.model.runs(), containing=run.id):
                label = ("Environments (torch, macOS, machine…)" if c.kind == "environment"
                         else f"Settings: {AXIS_WORDS.get(c.axis, contrast.SETTING_AXES.get(c.axis, c.axis))}")
                out.append((label, f"{c.kind}:{c.axis}", (c.kind, c.axis)))
        return out

    def whole_or_summary(self, ids: list[str]) -> list[RunResult]:
        """These runs as the table holds them (a summary keeps the windows' samples/s an interval needs)."""
        rows = [self.model.row_of(i) for i in ids]
        return [self.model.run_at(r) for r in rows if r is not None]

    def _fill_compare_choices(self, run: RunResult | None) -> None:
        from ...engine.analysis.scaling import world_of

        choices = self._contrast_choices(run)
        selection = tuple(self.selected_ids())
        if selection != getattr(self, "_compared_selection", None):  # another selection: the defaults again
            self._compared_selection, self._user_choice = selection, None
        previous = getattr(self, "_user_choice", None) or self.compare_combo.currentData()
        self.compare_combo.blockSignals(True)
        self.compare_combo.clear()
        for label, key, _ in choices:
            self.compare_combo.addItem(label, key)
        self._choices = {key: what for _, key, what in choices}
        keys = [key for _, key, _ in choices]
        if getattr(self, "_user_choice", None) in keys:  # what the user picked for this selection stays
            self.compare_combo.setCurrentIndex(keys.index(self._user_choice))
        elif "scaling" in keys and previous != "selected" and run is not None and world_of(run) > 1:
            # a run on several GPUs: its scaling first
            self.compare_combo.setCurrentIndex(keys.index("scaling"))
        elif previous in keys and not (previous == "devices" and "selected" in keys):
            self.compare_combo.setCurrentIndex(keys.index(previous))
        elif "selected" in keys:
            self.compare_combo.setCurrentIndex(keys.index("selected"))
        self.compare_combo.blockSignals(False)
        self.compare_bar.setVisible(len(choices) > 1 or (len(choices) == 1 and keys[0] != "devices"))

    def _scaling_of(self, run: RunResult):
        """The scaling over GPUs the run belongs to (engine analysis/scaling.py), None when it belongs to none."""
        from ...engine.analysis import scaling

        if run.status != "finished":
            return None
        return next((s for s in scaling.scalings(self.model.runs()) if run.id in {r.id for r in s.runs}), None)

    def shown_scaling(self):
        """The scaling the Compare menu shows, None when it shows something else."""
        if self.compare_combo.currentData() != "scaling":
            return None
        run = self._current_run()
        return self._scaling_of(run) if run is not None else None

    def shown_contrast(self):
        """The comparison by what differs the Compare menu shows (None: the devices' chart)."""
        from ...engine.analysis import contrast

        key = self.compare_combo.currentData()
        what = getattr(self, "_choices", {}).get(key)
        if what is None or what[0] == "scaling":
            return None
        run = self._current_run()
        baseline = self._baseline_id
        if what[0] == "selected":
            runs = self.whole_or_summary(what[1])
            if len(runs) < 2:  # deleted meanwhile
                return None
            chosen = next((r for r in runs if r.id == baseline), None)
            return contrast.of_runs(runs, chosen)
        kind, axis = what
        found = contrast.contrasts(self.model.runs(), baseline, containing=run.id if run else None)
        return next((c for c in found if c.kind == kind and c.axis == axis), None)

    def _chosen_comparison(self, _index: int) -> None:
        """The user picked in the Compare menu: it stays for this selection."""
        self._user_choice = self.compare_combo.currentData()
        self._update_chart()

    def _choose_baseline(self, run_id: str) -> None:
        self._baseline_id = run_id
        self._update_chart()

    def set_filter(self, text: str) -> None:
        """Show only the runs matching every word of `text` (case-insensitive)."""
        if self.filter.text() != text:
            self.filter.setText(text)
            return
        self.proxy.set_words(text)
        self._update_actions()

    def visible_ids(self) -> list[str]:
        return [self.proxy.index(r, 0).data(RUN_ID_ROLE) for r in range(self.proxy.rowCount())]

    def _select_current_group(self) -> None:
        c = self.current_comparison()
        if c is not None:
            self.select_ids([r.id for r in c.runs])

    def _update_actions(self) -> None:
        has_runs = self.model.rowCount() > 0
        self.delete_action.setEnabled(bool(self.selected_ids()))
        self.csv_action.setEnabled(has_runs)
        self.json_action.setEnabled(has_runs)
        self.png_action.setEnabled(self.current_comparison() is not None)
        if hasattr(self, "report_action"):
            self.report_action.setEnabled(self.report_parts_available())
            self.markdown_action.setEnabled(self.report_parts_available())
