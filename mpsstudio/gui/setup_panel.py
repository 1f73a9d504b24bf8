"""The run setup sidebar: model, dataset, devices and training options, turned into RunConfig objects.

The widgets are built in setup_form.py; this module gives them meaning (catalog, configs, summary).

It is built before torch is imported (disabled, "Loading PyTorch…") and comes alive in set_catalog().
Torch-side engine modules (models, devices) are imported only inside the methods that need them.
About 500 lines, on purpose: one widget's behaviour (catalog, folders, model files, configs, summary), whose
parts share its state; its widgets and small parts are already apart, in setup_form.py and setup_widgets.py.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QComboBox, QFileDialog, QLabel, QStyle, QWidget

from ..engine.machine.apple import MPS_COMPILE_NOTE
from ..engine.basics.config import RunConfig
from ..engine.basics.formatting import error_line, fmt_bytes, fmt_count, plural
from ..engine.basics.spec import DataSpec
from .setup_form import LOADING_TEXT, NO_DEVICE_TIP, PRECISION_TIPS, RUN_TIP, SetupForm
from .model_files import ModelFileGuard
from .setup_widgets import DeviceRow, run_target

MODEL_FILE_WARNING = "⚠︎ Loading a model file runs its code; only choose files you trust."
DEFAULT_STEPS = 200

_CHOOSE_FILE = "\x00choose-model-file"  # item data of the "Choose .py file…" entry
_FOLDER_ICON = "📁"

def dataset_facts(info, spec: DataSpec | None) -> str:
    """'shapes · 6,000 + 1,000 images · 1×28×28 · 10 classes' from a DatasetInfo's fields."""
    if info.spec is None:
        return f"{info.name} · random data shaped for the model · throughput only, no learning"
    facts = [info.name]
    if info.train_size is not None:
        facts.append(f"{info.train_size:,} + {info.val_size or 0:,} images")
    if spec is not None:
        facts += [f"{spec.channels}×{spec.height}×{spec.width}", plural(spec.num_classes, "class", "classes")]
    if info.download_bytes:
        facts.append(f"{fmt_bytes(info.download_bytes)} download")
    return " · ".join(facts)


def folder_facts(name: str, report, size: tuple[int, int] | None = None, model: str = "") -> str:
    """'pets · 2 classes · 8 images · 224×224 RGB for resnet18' from the engine's FolderReport (None: not checked
    yet); `size` is what the model gets (models.input_size_for_folder), else the folder's decode size is shown."""
    if report is None:
        return name
    w, h = size or report.target_size
    colour = "grayscale" if report.channels == 1 else "RGB"
    shape = f"{w}×{h} {colour}" + (f" for {Path(model).name}" if size and model else "")
    facts = [name, plural(len(report.classes), "class", "classes"), plural(report.total, "image"), shape]
    if report.skipped:
        facts.append(f"{plural(len(report.skipped), 'unreadable file')} skipped")
    return " · ".join(facts)


# ----------------------------------------------------------------------------------------------- the panel


class SetupPanel(SetupForm):
    """The sidebar form that turns the user's choices into one RunConfig per checked device."""

    run_requested = Signal()
    stop_requested = Signal()  # the Run button while a run is in progress: it reads Stop (⌘.)
    open_folder_requested = Signal()
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._device_rows: list[DeviceRow] = []
        self._dataset_infos: dict = {}
        self._model_infos: dict = {}
        self._folder_reports: dict[str, object] = {}  # folder path -> the engine's FolderReport (None: unchecked)
        self._param_cache: dict[tuple, int | str] = {}
        self._base = RunConfig()  # carries fields the form does not show (seed, threads, tf32, ...)
        self._pending: RunConfig | None = None
        self._loaded = False
        self._running = False
        self._quiet = 0
        self._steps_value = DEFAULT_STEPS
        self._epochs_value = RunConfig().epochs or 2
        self._length_mode = "epochs"
        self._model_index = 0
        self._labels: list[QLabel] = []
        self.setMinimumWidth(300)
        self.setMaximumWidth(360)
        self.model_files = ModelFileGuard(self)
        self.model_files.changed.connect(self._refresh)
        self._build()
        self._update_enabled()
        self._refresh()

    # ------------------------------------------------------------------------------------------- catalog

    def set_catalog(self, models: list, datasets: list, devices: list) -> None:
        """Fill the form with the engine's models, datasets and devices; enable it and select the defaults."""
        first = not self._loaded
        keep = self._pending or (RunConfig() if first else self._form_config())
        checked = set(self.checked_devices())
        self._quiet += 1
        try:
            self._model_infos = {m.name: m for m in models}
            self._dataset_infos = {d.name: d for d in datasets}
            self._fill_models(models)
            self._fill_datasets(datasets)
            self._fill_devices(devices)
            self._loaded = True
            self._apply(keep, check_all_available=first and self._pending is None)
            if not first:  # a refreshed catalog keeps the user's device choices
                for row in self._device_rows:
                    row.checkbox.setChecked(row.device.available and row.device.id in checked)
                self._update_precisions()
            self._pending = None
            self._pending_devices = None
        finally:
            self._quiet -= 1
        self._update_enabled()
        self._refresh()
        self.changed.emit()

    @staticmethod
    def _fill_named(combo, infos: list) -> None:
        """Items named by `info.name`, each with its description as tooltip."""
        combo.clear()
        for info in infos:
            combo.addItem(info.name, info.name)
            combo.setItemData(combo.count() - 1, info.description, Qt.ItemDataRole.ToolTipRole)

    def _fill_models(self, models: list) -> None:
        combo = self.model_combo
        self._fill_named(combo, models)
        combo.insertSeparator(combo.count())
        combo.addItem("Choose .py File…", _CHOOSE_FILE)
        combo.setItemData(combo.count() - 1, "Use your own model: a .py file that defines "
                          "build_model(num_classes, input_shape) returning a torch.nn.Module. "
                          "Loading a model file runs its code.", Qt.ItemDataRole.ToolTipRole)

    def _fill_datasets(self, datasets: list) -> None:
        self._fill_named(self.dataset_combo, datasets)
        for path, report in self._folder_reports.items():
            self._insert_folder(path, report)

    def _fill_devices(self, devices: list) -> None:
        for row in self._device_rows:
            self._devices_box.removeWidget(row)
            row.hide()  # gone now, not when the event loop gets to deleting it
            row.deleteLater()
        self._device_rows = []
        for device in devices:
            row = DeviceRow(device)
            row.toggled.connect(self._on_device_toggled)
            self._devices_box.addWidget(row)
            self._device_rows.append(row)

    # ------------------------------------------------------------------------------------------- datasets

    def add_folder_dataset(self, path: str, report) -> None:
        """Add a folder the engine checked (its FolderReport) to the dataset list as "📁 name" and select it;
        a known path is reselected."""
        index = self._folder_index(path)
        if index < 0:
            self._folder_reports[path] = report
            index = self._insert_folder(path, report)
        else:
            path = self.dataset_combo.itemData(index)
            self._folder_reports[path] = report
            self.dataset_combo.setItemData(index, self._folder_tip(path, report), Qt.ItemDataRole.ToolTipRole)
        self.dataset_combo.setCurrentIndex(index)
        self._refresh()

    def _folder_index(self, path: str) -> int:
        wanted = os.path.normpath(os.path.expanduser(path))
        for i in range(self.dataset_combo.count()):
            data = self.dataset_combo.itemData(i)
            if data and data not in self._dataset_infos and os.path.normpath(os.path.expanduser(data)) == wanted:
                return i
        return -1

    @staticmethod
    def _folder_tip(path: str, report) -> str:
        return f"{path}\n{report.summary()}" if report is not None else path

    def _insert_folder(self, path: str, report) -> int:
        combo = self.dataset_combo
        if combo.count() == len(self._dataset_infos) and self._dataset_infos:
            combo.insertSeparator(combo.count())
        name = Path(path).expanduser().name or path
        combo.addItem(f"{_FOLDER_ICON} {name}", path)
        combo.setItemData(combo.count() - 1, self._folder_tip(path, report), Qt.ItemDataRole.ToolTipRole)
        return combo.count() - 1

    # ------------------------------------------------------------------------------------------- models

    def _ask_model_file(self) -> str:
        """The file dialog for a user's model; '' when cancelled. (Tests replace this method.)"""
        path, _ = QFileDialog.getOpenFileName(self, "Choose a Model File", str(Path.home()),
                                              "Python files (*.py)")
        return path

    def _add_model_file(self, path: str) -> int:
        combo = self.model_combo
        index = combo.findData(path)
        if index >= 0:
            return index
        from ..engine.models import registry as models

        index = combo.findData(_CHOOSE_FILE) - 1  # before the separator that precedes "Choose .py File…"
        icon = self.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon)
        combo.insertItem(index, icon, Path(path).name, path)
        combo.setItemData(index, f"{path}\n{models.user_model_warning(path)}", Qt.ItemDataRole.ToolTipRole)
        return index

    def _on_model_index(self, index: int) -> None:
        if self.model_combo.itemData(index) != _CHOOSE_FILE:
            self._model_index = index
            self.model_combo.setToolTip(self.model_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
            self.check_model_button.setVisible(self._model_file() is not None)
            self._emit_changed()
            return
        if self._quiet:
            return
        path = self._ask_model_file()
        target = self._add_model_file(path) if path else self._model_index
        self.model_combo.setCurrentIndex(target)
        if path:
            self.check_model_file()  # chosen just now: ask to run it (restoring a setup never does)

    def _model_file(self) -> str | None:
        model = self.model_combo.currentData()
        return model if model not in (None, _CHOOSE_FILE) and model not in self._model_infos else None

    def check_model_file(self) -> bool | str:
        """Build the chosen model file in a separate process, after asking once per file content."""
        path = self._model_file()
        dataset = self.dataset_combo.currentData()
        if path is None or dataset is None:
            return False
        spec = self._dataset_spec_and_facts(path, dataset)[0]
        if spec is None:
            return False
        return self.model_files.check(path, self._file_model_spec(path, spec))

    def confirm_model_file(self) -> bool | str:
        """Before a run: True when no model file is chosen or the user agrees to run its code (see
        ModelFileGuard.confirm)."""
        path = self._model_file()
        return True if path is None else self.model_files.confirm(path)

    @staticmethod
    def _file_model_spec(path: str, spec: DataSpec) -> DataSpec:
        from ..engine.models import registry as models

        return models.input_spec_for(path, spec)  # checks the path only: runs nothing

    def _on_dataset_index(self, index: int) -> None:
        self.dataset_combo.setToolTip(self.dataset_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
        self._emit_changed()

    # ------------------------------------------------------------------------------------------- devices

    def checked_devices(self) -> list[str]:
        """Ids of the checked, available devices, in the catalog's order."""
        return [row.device.id for row in self._device_rows if row.checked]

    def _checked_device_objects(self) -> list:
        return [row.device for row in self._device_rows if row.checked]

    def _on_device_toggled(self, _checked: bool) -> None:
        self._update_precisions()
        self._update_button()
        self._emit_changed()

    def _update_precisions(self) -> None:
        """Disable precisions a checked device cannot run (the reason becomes the tooltip); fall back to fp32."""
        from ..engine.machine import precision as engine_precision

        checked = self._checked_device_objects()
        model = self.precision_combo.model()
        for i in range(self.precision_combo.count()):
            precision = self.precision_combo.itemData(i)
            reasons: list[str] = []
            for device in checked:
                try:
                    reason = engine_precision.precision_unsupported_reason(device, precision)
                except Exception as exc:  # a device that cannot even be asked cannot run it either
                    reason = f"{precision} could not be checked on {device.id} ({exc})"
                if reason and reason not in reasons:
                    reasons.append(reason)
            model.item(i).setEnabled(not reasons)
            tip = "\n".join(reasons) if reasons else PRECISION_TIPS.get(precision, "")
            self.precision_combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        if not self._precision_enabled(self.precision_combo.currentIndex()):
            self.precision_combo.setCurrentIndex(self.precision_combo.findData("fp32"))
        self._on_precision_index(self.precision_combo.currentIndex(), emit=False)

    def _precision_enabled(self, index: int) -> bool:
        item = self.precision_combo.model().item(index)
        return item is not None and item.isEnabled()

    def _on_precision_index(self, index: int, emit: bool = True) -> None:
        self.precision_combo.setToolTip(self.precision_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
        if emit:
            self._emit_changed()

    # ------------------------------------------------------------------------------------------- length, advanced

    def _on_length_unit(self, _index: int) -> None:
        mode = self.length_unit.currentData()
        if mode == self._length_mode:
            return
        self._length_mode = mode
        self._quiet += 1
        try:
            self.length_spin.setValue(self._steps_value if mode == "steps" else self._epochs_value)
        finally:
            self._quiet -= 1
        self._update_epoch_options()
        self._emit_changed()

    def _update_epoch_options(self) -> None:
        """Early stopping and the best epoch work per epoch: greyed out, saying why, for a steps run."""
        by_epoch = self._length_mode == "epochs"
        tips = self.__dict__.setdefault("_epoch_tips", {})
        for w in (self.patience_spin, self.monitor_combo, self.monitor_mode_combo, self.keep_best_check):
            tip = tips.setdefault(id(w), w.toolTip())
            w.setEnabled(by_epoch)
            w.setToolTip(tip)
            if not by_epoch:
                w.setToolTip("Early stopping and the best epoch watch the validation split after each epoch; set "
                             "the length in epochs to use them.")

    def _on_length_value(self, value: int) -> None:
        if self._length_mode == "steps":
            self._steps_value = value
        else:
            self._epochs_value = value
        self._emit_changed()

    def set_advanced_open(self, opened: bool) -> None:
        """Show or hide the Advanced options (collapsed by default)."""
        self.advanced_toggle.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        self.advanced.setVisible(opened)

    # ------------------------------------------------------------------------------------------- configs

    def rounds(self) -> int:
        """How many times the devices run, interleaved (Advanced, Repeat)."""
        return self.repeat_spin.value()

    def configs(self) -> list[RunConfig]:
        """One RunConfig per checked device, identical but for `device` (the engine validates them)."""
        if not self._loaded:
            return []
        base = self._form_config()
        return [base.with_device(device) for device in self.checked_devices()]

    def _form_config(self) -> RunConfig:
        """The form's choices on top of the fields it does not show; `device` is left as it was."""
        model = self.model_combo.currentData()
        if model in (None, _CHOOSE_FILE):
            model = self._base.model
        steps = self.length_spin.value() if self._length_mode == "steps" else None
        epochs = self.length_spin.value() if self._length_mode == "epochs" else None
        return replace(
            self._base,
            model=model,
            dataset=self.dataset_combo.currentData() or self._base.dataset,
            batch_size=self.batch_spin.value(),
            steps=steps,
            epochs=epochs,
            precision=self.precision_combo.currentData() or "fp32",
            lr=float(self.lr_box.value()),
            optimizer=self.optimizer_combo.currentData(),
            warmup_steps=self.warmup_spin.value(),
            workers=self.workers_spin.value(),
            mode=self.mode_combo.currentData(),
            resident=self.resident_check.isChecked(),
            channels_last=self.channels_last_check.isChecked(),
            compile=self.compile_check.isChecked(),
            mps_fallback=self.mps_fallback_check.isChecked(),
            accumulate=self.accumulate_spin.value(),
            # early stopping and the best epoch are for epoch runs: a steps run leaves them off
            early_stop_patience=(self.patience_spin.value() or None) if epochs is not None else None,
            early_stop_monitor=self.monitor_combo.currentData(),
            early_stop_mode=self.monitor_mode_combo.currentData(),
            keep_best=self.keep_best_check.isChecked() and epochs is not None,
            options=dict(self._base.options),
        )

    def apply_config(self, config: RunConfig, devices: list[str] | None = None) -> None:
        """Set the form from a config (restoring the last setup); `devices`: every device to check (a comparison).

        Before set_catalog it waits for the catalog."""
        self._pending_devices = devices
        if not self._loaded:
            self._pending = config
            return
        self._quiet += 1
        try:
            self._apply(config, check_all_available=False)
        finally:
            self._quiet -= 1
        self._refresh()
        self.changed.emit()

    def _apply(self, config: RunConfig, check_all_available: bool) -> None:
        self._base = replace(config, options=dict(config.options))
        index = self.model_combo.findData(config.model)
        if index < 0 and config.model.lower().endswith(".py"):
            index = self._add_model_file(config.model)
        if index >= 0:
            self.model_combo.setCurrentIndex(index)
        index = self.dataset_combo.findData(config.dataset)
        if index < 0 and config.dataset not in self._dataset_infos:
            index = self._folder_index(config.dataset)
            if index < 0:
                self._folder_reports[config.dataset] = None
                index = self._insert_folder(config.dataset, None)
        if index >= 0:
            self.dataset_combo.setCurrentIndex(index)

        known = {row.device.id for row in self._device_rows if row.device.available}
        wanted = set(getattr(self, "_pending_devices", None) or [config.device]) & known
        for row in self._device_rows:
            if check_all_available:
                row.checkbox.setChecked(row.device.available)
            elif wanted:
                row.checkbox.setChecked(row.device.id in wanted)
        if not self.checked_devices():  # the config's device is gone (a restored MPS setup on another machine)
            first_available = next((row for row in self._device_rows if row.device.available), None)
            if first_available is not None:
                first_available.checkbox.setChecked(True)

        self.batch_spin.setValue(config.batch_size)
        if config.steps is not None:
            self._steps_value = config.steps
            self.length_unit.setCurrentIndex(self.length_unit.findData("steps"))
        else:
            self._epochs_value = config.epochs or self._epochs_value
            self.length_unit.setCurrentIndex(self.length_unit.findData("epochs"))
        self.length_spin.setValue(self._steps_value if self._length_mode == "steps" else self._epochs_value)

        self._update_precisions()
        index = self.precision_combo.findData(config.precision)
        if index >= 0 and self._precision_enabled(index):
            self.precision_combo.setCurrentIndex(index)
        self.lr_box.setValue(config.lr)
        self._select(self.optimizer_combo, config.optimizer)
        self.warmup_spin.setValue(config.warmup_steps)
        self.workers_spin.setValue(config.workers)
        self._select(self.mode_combo, config.mode)
        self.resident_check.setChecked(config.resident)
        self.channels_last_check.setChecked(config.channels_last)
        self.compile_check.setChecked(config.compile)
        self.mps_fallback_check.setChecked(config.mps_fallback)
        self.accumulate_spin.setValue(config.accumulate)
        self.patience_spin.setValue(config.early_stop_patience or 0)
        self._select(self.monitor_combo, config.early_stop_monitor)
        self.monitor_mode_combo.setCurrentIndex(max(0, self.monitor_mode_combo.findData(config.early_stop_mode)))
        self.keep_best_check.setChecked(config.keep_best)
        self._update_button()

    @staticmethod
    def _select(combo: QComboBox, value: str) -> None:
        index = combo.findData(value)
        if index >= 0:
            combo.setCurrentIndex(index)

    # ------------------------------------------------------------------------------------------- state

    def set_running(self, running: bool) -> None:
        """Disable editing while a run is in progress; the Run button becomes Stop meanwhile."""
        self._running = running
        self._stopping = False
        self._update_enabled()
        self._update_button()

    def set_stopping(self) -> None:
        """Stop was asked for: the button says so until the run ends."""
        self._stopping = True
        self._update_button()

    def _run_clicked(self) -> None:
        if self._running:
            if not getattr(self, "_stopping", False):
                self.stop_requested.emit()
        else:
            self.run_requested.emit()

    def _update_enabled(self) -> None:
        editable = self._loaded and not self._running
        self._form.setEnabled(editable)
        self._update_button()

    def _update_button(self) -> None:
        checked = self._checked_device_objects()
        button = self.run_button
        if self._running:
            stopping = getattr(self, "_stopping", False)
            button.setText("Stopping…" if stopping else "Stop")
            button.setEnabled(not stopping)
            button.setToolTip("Stop at the end of the current measurement window; what was measured is kept "
                              f"({QKeySequence('Ctrl+.').toString(QKeySequence.SequenceFormat.NativeText)}).")
            return
        elif len(checked) > 1:
            button.setText(f"Compare {len(checked)} devices")
        elif checked:
            button.setText(f"Run on {run_target(checked[0])}")
        else:
            button.setText("Run")
        button.setEnabled(self._loaded and not self._running and bool(checked))
        if not self._loaded:
            button.setToolTip(LOADING_TEXT)
        elif not checked:
            button.setToolTip(NO_DEVICE_TIP)
        else:
            button.setToolTip(RUN_TIP)

    def _emit_changed(self, *_args) -> None:
        if self._quiet:
            return
        self._refresh()
        self.changed.emit()

    def _refresh(self) -> None:
        self.summary.setText(self.summary_text())

    # ------------------------------------------------------------------------------------------- summary

    def summary_text(self) -> str:
        """One line on the dataset and the model, e.g. 'shapes · 6,000 + 1,000 images · … — mlp · 1.5 M parameters'."""
        if not self._loaded:
            return LOADING_TEXT
        model = self.model_combo.currentData()
        dataset = self.dataset_combo.currentData()
        if model in (None, _CHOOSE_FILE) or dataset is None:
            return ""
        spec, facts = self._dataset_spec_and_facts(model, dataset)
        model_name = self._model_title(model)
        params = self._parameters(model, spec)
        if isinstance(params, int):
            text = f"{facts} — {model_name} · {fmt_count(params)} parameters"
        elif params:
            text = f"{facts} — {model_name}: {params}"
        else:
            text = f"{facts} — {model_name}"
        if model not in self._model_infos:
            text += f"\n{MODEL_FILE_WARNING}"
        if self.compile_check.isChecked() and any(d.kind == "mps" for d in self._checked_device_objects()):
            text += f"\n{MPS_COMPILE_NOTE}"
        return text

    def _model_title(self, model: str) -> str:
        return model if model in self._model_infos else Path(model).name

    def _dataset_spec_and_facts(self, model: str, dataset: str) -> tuple[DataSpec | None, str]:
        info = self._dataset_infos.get(dataset)
        if info is not None:
            if info.spec is None:  # synthetic: shaped like the model's input
                return self._model_default_spec(model), dataset_facts(info, None)
            return info.spec, dataset_facts(info, info.spec)
        report = self._folder_reports.get(dataset)
        name = Path(dataset).expanduser().name or dataset
        if report is None:
            return None, name
        preferred = getattr(self._model_infos.get(model), "preferred_image_size", None)
        spec = report.spec(self._base.image_size or preferred)
        try:
            from ..engine.models import registry as models

            size = models.input_size_for_folder(model, report, self._base.image_size)  # what the model gets
        except Exception:  # a model file not read yet, an unknown model: the folder's own size
            size = None
        return spec, folder_facts(name, report, size, model)

    def _model_default_spec(self, model: str) -> DataSpec | None:
        info = self._model_infos.get(model)
        if info is not None:
            return info.default_spec
        try:
            from ..engine.models import registry as models

            return models.get_model_info(model).default_spec
        except Exception:
            return None

    def _parameters(self, model: str, spec: DataSpec | None) -> int | str:
        """The model's parameter count for the data (cached); the error's sentence if it cannot be built."""
        if spec is None:
            return ""
        from ..engine.models import registry as models
        from ..engine.basics.errors import UserError

        if model not in self._model_infos:  # a user's file: never run here (model_files.py)
            try:
                return self.model_files.parameters(model, self._file_model_spec(model, spec))
            except UserError as exc:
                return str(exc)
        key = (model, spec)
        if key not in self._param_cache:
            try:
                self._param_cache[key] = models.parameter_count(model, models.input_spec_for(model, spec))
            except UserError as exc:
                self._param_cache[key] = str(exc)
            except Exception as exc:
                self._param_cache[key] = f"the model could not be built ({error_line(exc, 120)})"
        return self._param_cache[key]
