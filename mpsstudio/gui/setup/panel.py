"""The run setup sidebar: model, dataset, devices and training options, turned into RunConfig objects.

The widgets are built in form.py; the panel gives them meaning, in parts that share its state: the catalogue
(catalog.py), how choices depend on each other (choices.py), the RunConfigs (configs.py) and the summary line
(summary.py).

It is built before torch is imported (disabled, "Loading PyTorch…") and comes alive in set_catalog().
Torch-side engine modules (models, devices) are imported only inside the methods that need them.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QLabel, QWidget

from ...engine.basics.config import RunConfig, precision_note
from ...engine.basics.request import RunRequest
from ...engine.basics.spec import DataSpec
from ...engine.machine.apple import MPS_COMPILE_NOTE
from . import rules
from .catalog import CatalogMixin
from .choices import ChoicesMixin
from .configs import ConfigsMixin
from .inputs import input_kind
from .form import LOADING_TEXT, NO_DEVICE_TIP, RUN_TIP, SetupForm
from .model_files import ModelFileGuard
from .rules import MODEL_FILE_WARNING
from .summary import SetupFacts, dataset_facts, folder_facts
from .widgets import DeviceRow, run_target

__all__ = ["DEFAULT_STEPS", "LOADING_TEXT", "MODEL_FILE_WARNING", "NO_DEVICE_TIP", "SetupPanel", "dataset_facts",
           "folder_facts"]

DEFAULT_STEPS = rules.DEFAULT_STEPS

class SetupPanel(CatalogMixin, ChoicesMixin, ConfigsMixin, SetupForm):
    """The sidebar form that turns the user's choices into one RunConfig per checked device."""

    run_requested = Signal()
    stop_requested = Signal()  # the Run button while a run is in progress: it reads Stop (⌘.)
    open_folder_requested = Signal()
    script_requested = Signal()  # the Model picker's "Your Training Script…"
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._device_rows: list[DeviceRow] = []
        self.facts = SetupFacts()  # the catalogue's models, datasets and folders, and the models' counts
        self._base = RunRequest()  # carries settings the form does not show (seed, threads, tf32, ...)
        self._pending: RunConfig | None = None
        self._loaded = False
        self._running = False
        self._quiet = 0
        self._length = rules.Length(epochs=self._base.settings.epochs or 2)  # steps or epochs, each kept
        self._model_index = 0
        self._labels: list[QLabel] = []
        self.setMinimumWidth(300)
        self.setMaximumWidth(360)
        self.model_files = ModelFileGuard(self)
        self.model_files.changed.connect(self._refresh)
        self._build()
        for choice in (self.frameworks, self.gpus):
            choice.changed.connect(lambda: (self._refresh(), self._update_button(), self._emit_changed()))
        self.pythons.changed.connect(lambda: (self._refresh(), self._update_button()))
        self.pythons.listed.connect(self._update_button)
        self.guard_row.fix_requested.connect(self._apply_guard)
        self._update_enabled()
        self._refresh()

    # -- the summary line (summary.py: SetupFacts) ------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._loaded:
            self._update_input_rows()
            self._training_form.setRowVisible(self.finetune_combo, self._is_model_folder(self.model_combo.currentData()))
        self.summary.setText(self.summary_text())
        if self._loaded:
            self.guard_row.show(self.guard())
        self._update_button()

    def summary_text(self) -> str:
        """One line on the dataset and the model, e.g. 'shapes · 6,000 + 1,000 images · … — mlp · 1.5 M parameters'."""
        if not self._loaded:
            return LOADING_TEXT
        model = self.model_combo.currentData()
        dataset = self.dataset_combo.currentData()
        if model in (None, rules.CHOOSE_FILE) or dataset is None:
            return ""
        spec, facts = self._dataset_spec_and_facts(model, dataset)
        params = self.facts.parameters(model, spec, self.model_files.parameters)
        text = self.facts.line(model, facts, params, self.facts.macs(model, spec) if isinstance(params, int) else None)
        if self.compile_check.isChecked() and any(d.kind == "mps" for d in self._checked_device_objects()):
            text += f"\n{MPS_COMPILE_NOTE}"
        notes = {precision_note(c) for c in self.configs()} - {""}
        return text + "".join(f"\n{note}" for note in sorted(notes))

    def _dataset_spec_and_facts(self, model: str, dataset: str) -> tuple[DataSpec | None, str]:
        info = self.facts.dataset_infos.get(dataset)
        if info is None:
            return self.facts.folder_spec_and_facts(model, dataset, self._base.settings.image_size)
        if info.spec is not None:
            return info.spec, dataset_facts(info, info.spec)
        # synthetic: the engine's sample for the model and the Input and Classes rows
        from ...engine.basics.errors import UserError
        from ...engine.run.setup import synthetic_input

        problem = self.input_problem()
        if problem:
            return None, f"{info.name}: {problem}"
        try:
            spec = synthetic_input(self._form_request().changed(model=model).settings)
        except UserError as exc:
            return None, f"{info.name}: {exc}"
        except Exception:  # a model file that cannot be read yet: its own words come with Run
            return self._model_default_spec(model), dataset_facts(info, None)
        return spec, dataset_facts(info, spec)

    def _model_default_spec(self, model: str) -> DataSpec | None:
        return self.facts.model_default_spec(model)

    def _is_model_folder(self, model) -> bool:
        return self.facts.is_model_folder(model)

    # -- the input rows (inputs.py) -----------------------------------------------------------------------------
    def _input_kind(self) -> str:
        return input_kind(self.dataset_combo.currentData(), self.model_combo.currentData(), self.facts.dataset_infos,
                          self.facts.model_infos)

    def _update_input_rows(self) -> None:
        """Show the rows the data takes, with the model's own input as their default."""
        model = self.model_combo.currentData()
        own = self._model_default_spec(model) if model not in (None, rules.CHOOSE_FILE) else None
        preferred = getattr(self.facts.model_infos.get(model), "preferred_image_size", None)
        if preferred is None and own is not None and model not in self.facts.model_infos and own.kind == "image":
            preferred = own.height  # a user's file that declares INPUT_SHAPE
        self.inputs.show_for(self._input_kind(), own, preferred)

    def _input_fields(self) -> dict:
        return self.inputs.fields(self._input_kind())

    def input_problem(self) -> str:
        """One sentence when the Input text is not a shape; '' otherwise."""
        return self.inputs.problem(self._input_kind())

    def _apply_inputs(self, config) -> None:
        needs_own = config.input_shape is None and config.image_size and str(config.dataset).lower() == "synthetic"
        self.inputs.apply(config, self._model_default_spec(config.model) if needs_own else None)

    # -- the guard (guards.py, rules.first_guard) ------------------------------------------------------------------
    def guard(self):
        """The engine's first guard for the form's setup, or None (nothing loaded, nothing wrong)."""
        if not self._loaded or self.input_problem():
            return None
        return rules.first_guard(self.configs(), self.facts.dataset_infos, self.facts.folder_reports)

    def train_samples(self) -> int | None:
        """The training samples the form's setup gets, None when unknown."""
        return rules.train_samples(self.configs(), self.facts.dataset_infos, self.facts.folder_reports)

    def _apply_guard(self, _shown: dict) -> None:
        found = self.guard()  # the setup's guard now (the one shown, unless the setup changed since)
        if found is None:
            return
        self.apply_config(self._form_request().changed(**found.fix).settings, devices=self.checked_devices())

    # -- the framework, GPU-count and PyTorch choices (environments.py) --------------------------------------------
    def set_mlx(self, status: dict) -> None:
        """{kind: reason} from the catalog ("" where MLX runs on that kind of device)."""
        self.frameworks.set_mlx(status)

    def checked_frameworks(self) -> list[str]:
        return self.frameworks.checked()

    def mlx_runs_on(self, device: str) -> bool:
        return self.frameworks.runs_on(device)

    def set_gpu_count(self, n: int) -> None:
        """The machine's CUDA GPUs: the field's choices (hidden with fewer than two)."""
        self.gpus.set_count(n)

    def gpu_counts(self) -> list[int]:
        return self.gpus.counts()

    def set_environments(self, environments: list[dict], own: str) -> None:
        """Preferences' other PyTorch environments ([{"path", "label"}]) beside this app's own (`own`)."""
        self.pythons.set_environments(environments, own)

    def checked_pythons(self) -> list[str | None]:
        return self.pythons.checked()

    # ------------------------------------------------------------------------------------------- datasets

    # ------------------------------------------------------------------------------------------- devices

    # ------------------------------------------------------------------------------------------- configs

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
        pythons = len(self.checked_pythons())
        button.setText(rules.run_words(checked, pythons, self.gpu_counts(), run_target))
        problem = rules.run_problem(self.input_problem() if self._loaded else "", pythons, "")
        blocking = self.guard() if self._loaded and not problem and checked else None
        if blocking is not None and blocking.blocking:
            problem = blocking.sentence
        button.setEnabled(self._loaded and not self._running and bool(checked) and not problem)
        if not self._loaded:
            button.setToolTip(LOADING_TEXT)
        elif not checked:
            button.setToolTip(NO_DEVICE_TIP)
        elif problem:
            button.setToolTip(problem)
        else:
            button.setToolTip(RUN_TIP)

    def _emit_changed(self, *_args) -> None:
        if self._quiet:
            return
        self._refresh()
        self.changed.emit()

    # ------------------------------------------------------------------------------------------- summary





