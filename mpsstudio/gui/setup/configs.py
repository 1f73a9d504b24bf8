"""Form <-> RunRequest: the form's choices as the request both front ends plan through, and a config put back."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from ...engine.basics.config import RunConfig
from ...engine.basics.errors import UserError
from ...engine.basics.request import RunRequest
from . import rules
from .rules import CHOOSE_FILE


class ConfigsMixin:
    """The form's choices as one RunRequest, planned by the engine (run/session.plan_request) into one RunConfig
    per checked device; a RunConfig (a restored setup, a stored run) put back into the form."""

    def rounds(self) -> int:
        """How many times the devices run, interleaved (Advanced, Repeat)."""
        return self.repeat_spin.value()

    def request(self) -> RunRequest:
        """What the form says: its settings, the checked devices, frameworks, Python environments and GPU counts."""
        return self._form_request().changed(
            **rules.axes(self.checked_devices(), self.checked_frameworks(), self.checked_pythons(), self.gpu_counts()),
            rounds=self.rounds())

    def plan(self, **changes):
        """The engine's plan of the form's request with `changes` (the Preferences' settings; session.Plan);
        UserError: why nothing can run."""
        from ...engine.run import session

        return session.plan_request(self.request().changed(**changes), here=self.here())

    def plan_of(self, request: RunRequest):
        """The engine's plan of another request (a script, a tool's stored setup) on the devices the form knows."""
        from ...engine.run import session

        return session.plan_request(request, here=self.here())

    def here(self):
        """What the catalogue found of this machine (session.Here): the plan needs not probe it again."""
        from ...engine.run import session

        return session.Here(known=tuple(row.device for row in self._device_rows), mlx=dict(self.frameworks.status))

    def configs(self) -> list:
        """The runs the form's setup plans (the engine's RunConfigs, one per checked device and framework); []
        before the catalogue, or where the plan refuses (configs_to_run says why)."""
        if not self._loaded:
            return []
        try:
            return self.plan().configs
        except UserError:
            return []

    def _form_config(self):
        """The form's settings (a RunConfig the engine made; its device left as it was)."""
        return self._form_request().settings

    def _form_request(self) -> RunRequest:
        """The form's choices on top of the fields it does not show."""
        base = self._base.settings
        model = self.model_combo.currentData()
        if model in (None, CHOOSE_FILE):
            model = base.model
        by_epoch = self._length.by_epoch
        return self._base.changed(
            model=model,
            dataset=self.dataset_combo.currentData() or base.dataset,
            batch_size=self.batch_spin.value(),
            **self._length.fields(self.length_spin.value()),
            precision=self.precision_combo.currentData() or "fp32",
            lr=float(self.lr_box.value()),
            optimizer=self.optimizer_combo.currentData(),
            warmup_steps=self.warmup_spin.value(),
            workers=self.workers_spin.value(),
            mode=self.mode_combo.currentData(),
            resident=self.resident_check.isChecked(),
            channels_last=self.channels_last_check.isChecked(),
            compile=self.compile_check.isChecked(),
            tf32=self.tf32_check.checkState() == Qt.CheckState.Checked,
            tf32_conv=self.tf32_check.checkState() == Qt.CheckState.PartiallyChecked,
            mps_fallback=self.mps_fallback_check.isChecked(),
            cast_float64=self.cast_float64_check.isChecked(),
            accumulate=self.accumulate_spin.value(),
            **rules.epoch_fields(by_epoch, self.patience_spin.value(), self.keep_best_check.isChecked()),
            early_stop_monitor=self.monitor_combo.currentData(),
            early_stop_mode=self.monitor_mode_combo.currentData(),
            options=self._options(model),
            **self._input_fields(),
        )

    def _options(self, model) -> dict:
        """The base's options, with a model folder's fine-tuning (Training ▸ Fine-tuning) where the model is one."""
        options = {k: v for k, v in self._base.settings.options.items() if k != "finetune"}
        if self._is_model_folder(model):
            options["finetune"] = self.finetune_combo.currentData()
        return options

    def apply_config(self, config: RunConfig, devices: list[str] | None = None) -> None:
        """Set the form from a config (restoring the last setup); `devices`: every device to check (a comparison).

        Before set_catalog it waits for the catalog."""
        self._pending_devices = devices
        if config.framework == "mlx" and self.mlx_check.isEnabled():
            self.mlx_check.setChecked(True)
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
        self._base = RunRequest.of(config)
        index = self.model_combo.findData(config.model)
        if index < 0 and config.model.lower().endswith(".py"):
            index = self._add_model_file(config.model)
        if index >= 0:
            self.model_combo.setCurrentIndex(index)
        index = self.dataset_combo.findData(config.dataset)
        if index < 0 and config.dataset not in self.facts.dataset_infos:
            index = self._folder_index(config.dataset)
            if index < 0:
                self.facts.folder_reports[config.dataset] = None
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

        self._apply_inputs(config)
        self.batch_spin.setValue(config.batch_size)
        shown = self._length.mode
        self._length.restore(config.steps, config.epochs)
        wanted, self._length.mode = self._length.mode, shown  # the unit's handler switches it and shows its value
        self.length_unit.setCurrentIndex(self.length_unit.findData(wanted))
        self.length_spin.setValue(self._length.shown())

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
        self.tf32_check.setCheckState(Qt.CheckState.Checked if config.tf32 else Qt.CheckState.PartiallyChecked
                                      if config.tf32_conv else Qt.CheckState.Unchecked)
        self.mps_fallback_check.setChecked(config.mps_fallback)
        self.cast_float64_check.setChecked(config.cast_float64)
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
