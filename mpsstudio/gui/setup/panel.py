"""The run setup sidebar: model, dataset, devices and training options, as the RunRequest both front ends plan through.

The panel is composed of controls, each owning its widgets and bound to its fields: the model (model_choice.py), the
dataset (dataset_choice.py) and its input rows (inputs.py), the devices (device_list.py) with the framework, GPU and
PyTorch choices (environments.py), the Training section (training.py), the Advanced section (advanced.py) and the
footer (footer.py: summary, guard, Run). What the choices imply is rules.py's (Qt-free); what the catalogue says of
models, datasets and folders is summary.py's SetupFacts. The panel reads the controls into a request, puts a config
back into them, and says the engine's plan.

It is built before torch is imported (disabled, "Loading PyTorch…") and comes alive in set_catalog().
Torch-side engine modules (models, devices) are imported only inside the methods that need them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from ...engine.basics.config import RunConfig, precision_note
from ...engine.basics.errors import UserError
from ...engine.basics.request import RunRequest
from ...engine.basics.spec import DataSpec
from ...engine.machine.apple import MPS_COMPILE_NOTE
from . import rules
from .advanced import AdvancedSection
from .dataset_choice import DatasetChoice
from .device_list import DeviceList
from .environments import FrameworkChoice, GpuChoice, PythonChoice
from .footer import NO_DEVICE_TIP, RunFooter
from .inputs import InputRows, input_kind
from .model_choice import ModelChoice
from .model_files import ModelFileGuard
from .rules import CHOOSE_FILE, LOADING_TEXT, MODEL_FILE_WARNING
from .summary import SetupFacts, dataset_facts, folder_facts
from .training import TrainingRows
from .widgets import FormRows, SectionHeading, run_target

__all__ = ["DEFAULT_STEPS", "LOADING_TEXT", "MODEL_FILE_WARNING", "NO_DEVICE_TIP", "SetupPanel", "dataset_facts",
           "folder_facts"]

DEFAULT_STEPS = rules.DEFAULT_STEPS


class SetupPanel(QWidget):
    """The sidebar form that turns the user's choices into one RunConfig per checked device."""

    run_requested = Signal()
    stop_requested = Signal()  # the Run button while a run is in progress: it reads Stop (⌘.)
    open_folder_requested = Signal()
    script_requested = Signal()  # the Model picker's "Your Training Script…"
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.facts = SetupFacts()  # the catalogue's models, datasets and folders, and the models' counts
        self._base = RunRequest()  # carries settings the form does not show (seed, threads, tf32, ...)
        self._pending: RunConfig | None = None
        self._pending_devices: list[str] | None = None
        self._loaded = False
        self._running = False
        self._quiet = 0
        self.setMinimumWidth(300)
        self.setMaximumWidth(360)
        self.model_files = ModelFileGuard(self)
        self.model_files.changed.connect(self._refresh)
        self._build()
        self._connect()
        self._update_enabled()
        self._refresh()

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        self._scroll = QScrollArea()
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll.setWidgetResizable(True)
        self._scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._form = QWidget()
        self._scroll.setWidget(self._form)
        outer.addWidget(self._scroll, 1)

        form = QVBoxLayout(self._form)
        form.setContentsMargins(16, 14, 16, 8)
        form.setSpacing(6)
        rows = FormRows()
        quiet = lambda: self._quiet > 0  # noqa: E731 (the form is being set, not edited)
        self.models = ModelChoice(form, self.facts, quiet, self)
        self.datasets = DatasetChoice(form, self.facts, self)
        self.inputs = InputRows(form, rows, self)
        self.devices = DeviceList(form, self)
        self.frameworks = FrameworkChoice(form, self)
        self.gpus = GpuChoice(form, self)
        self.pythons = PythonChoice(form, SectionHeading("PyTorch"), self)
        self.training = TrainingRows(form, rows, self)
        self.advanced_section = AdvancedSection(form, rows, self)
        form.addStretch(1)
        rows.align()

        footer = QVBoxLayout()
        footer.setContentsMargins(16, 8, 16, 16)
        footer.setSpacing(10)
        self.footer = RunFooter(footer, self)
        outer.addLayout(footer)

    def _connect(self) -> None:
        self.models.changed.connect(self._emit_changed)
        self.models.script_requested.connect(self.script_requested)
        self.models.file_chosen.connect(lambda _path: self.check_model_file())
        self.models.check_requested.connect(self.check_model_file)
        self.datasets.changed.connect(self._emit_changed)
        self.datasets.open_folder_requested.connect(self.open_folder_requested)
        self.inputs.changed.connect(self._emit_changed)
        self.devices.toggled.connect(self._on_device_toggled)
        for choice in (self.frameworks, self.gpus):
            choice.changed.connect(self._on_environment_changed)
        self.pythons.changed.connect(self._refresh)  # (the Run button with it)
        self.pythons.listed.connect(self._update_button)
        self.training.changed.connect(self._emit_changed)
        self.training.unit_changed.connect(self.advanced_section.set_by_epoch)
        self.advanced_section.changed.connect(self._emit_changed)
        self.footer.run_requested.connect(self.run_requested)
        self.footer.stop_requested.connect(self.stop_requested)
        self.footer.fix_requested.connect(self._apply_guard)

    # -- the catalogue -------------------------------------------------------------------------------------------
    def set_catalog(self, models: list, datasets: list, devices: list) -> None:
        """Fill the form with the engine's models, datasets and devices; enable it and select the defaults."""
        first = not self._loaded
        keep = self._pending or (RunRequest().settings if first else self._form_request().settings)
        checked = self.checked_devices()
        self._quiet += 1
        try:
            self.facts.model_infos = {m.name: m for m in models}
            self.facts.dataset_infos = {d.name: d for d in datasets}
            self.models.fill(models)
            self.datasets.fill(datasets)
            self.devices.fill(devices)
            self.gpus.set_count(sum(1 for d in devices if d.kind == "cuda" and d.available))
            self._loaded = True
            self._apply(keep, check_all_available=first and self._pending is None)
            if not first:  # a refreshed catalog keeps the user's device choices
                self.devices.check(checked)
                self.training.update_precisions(self.devices.checked())
            self._pending = None
            self._pending_devices = None
        finally:
            self._quiet -= 1
        self._update_enabled()
        self._refresh()
        self.changed.emit()

    def add_folder_dataset(self, path: str, report) -> None:
        """Add a folder the engine checked (its FolderReport) to the dataset list as its name beside the platform's
        folder icon and select it; a known path is reselected."""
        self.datasets.add_folder(path, report)
        self._refresh()

    def add_text_dataset(self, path: str, text: dict) -> None:
        """A text dataset the engine tokenized for the chosen model folder, added to the list and selected."""
        self.datasets.add_text(path, text)
        self._refresh()

    def use_model_folder(self, path: str, description: str) -> None:
        """A Hugging Face model folder as the model, on synthetic data: its batches are made for its task."""
        self.models.use_folder(path, description)
        self.datasets.select_synthetic()

    # -- the summary line (summary.py: SetupFacts) ------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._loaded:
            self._update_input_rows()
            self.training.show_finetune(self.facts.is_model_folder(self.models.current()),
                                        mlx="mlx" in self.frameworks.checked())
        self.footer.summary.setText(self.summary_text())
        if self._loaded:
            self.footer.guard_row.show(self.guard())
        self._update_button()

    def summary_text(self) -> str:
        """One line on the dataset and the model, e.g. 'shapes · 6,000 + 1,000 images · … — mlp · 1.5 M parameters'."""
        if not self._loaded:
            return LOADING_TEXT
        model = self.models.current()
        dataset = self.datasets.current()
        if model in (None, rules.CHOOSE_FILE) or dataset is None:
            return ""
        spec, facts = self._dataset_spec_and_facts(model, dataset)
        params = self.facts.parameters(model, spec, self.model_files.parameters)
        text = self.facts.line(model, facts, params, self.facts.macs(model, spec) if isinstance(params, int) else None)
        if self.advanced_section.compile_check.isChecked() and any(d.kind == "mps" for d in self.devices.checked()):
            text += f"\n{MPS_COMPILE_NOTE}"
        notes = {precision_note(c) for c in self.configs()} - {""}
        return text + "".join(f"\n{note}" for note in sorted(notes))

    def _dataset_spec_and_facts(self, model: str, dataset: str) -> tuple[DataSpec | None, str]:
        return self.facts.spec_and_facts(model, dataset, self._base.settings.image_size,
                                         lambda: self._form_request().settings, self.input_problem())

    # -- the input rows (inputs.py) -----------------------------------------------------------------------------
    def _input_kind(self) -> str:
        return input_kind(self.datasets.current(), self.models.current(), self.facts.dataset_infos,
                          self.facts.model_infos)

    def _update_input_rows(self) -> None:
        """Show the rows the data takes, with the model's own input as their default."""
        model = self.models.current()
        own = self.facts.model_default_spec(model) if model not in (None, rules.CHOOSE_FILE) else None
        preferred = getattr(self.facts.model_infos.get(model), "preferred_image_size", None)
        if preferred is None and own is not None and model not in self.facts.model_infos and own.kind == "image":
            preferred = own.height  # a user's file that declares INPUT_SHAPE
        self.inputs.show_for(self._input_kind(), own, preferred)

    def input_problem(self) -> str:
        """One sentence when the Input text is not a shape; '' otherwise."""
        return self.inputs.problem(self._input_kind())

    # -- the guard (footer.py's GuardRow, rules.first_guard) --------------------------------------------------------
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

    # -- a user's model file (model_files.py) --------------------------------------------------------------------
    def check_model_file(self) -> bool | str:
        """Build the chosen model file in a separate process, after asking once per file content."""
        path = self.models.model_file()
        dataset = self.datasets.current()
        if path is None or dataset is None:
            return False
        spec = self._dataset_spec_and_facts(path, dataset)[0]
        if spec is None:
            return False
        from ...engine.models import registry as models

        return self.model_files.check(path, models.input_spec_for(path, spec))  # input_spec_for runs nothing

    def confirm_model_file(self) -> bool | str:
        """Before a run: True when no model file is chosen or the user agrees to run its code (see
        ModelFileGuard.confirm)."""
        path = self.models.model_file()
        return True if path is None else self.model_files.confirm(path)

    # -- the devices (device_list.py) ------------------------------------------------
    def checked_devices(self) -> list[str]:
        """Ids of the checked, available devices, in the catalog's order."""
        return self.devices.checked_ids()

    def _on_environment_changed(self) -> None:
        self._refresh()
        self._emit_changed()

    def _on_device_toggled(self) -> None:
        self.training.update_precisions(self.devices.checked())
        self._update_button()
        self._emit_changed()

    # -- the request and its plan ----------------------------------------------------------------------------------
    def request(self) -> RunRequest:
        """What the form says: its settings, the checked devices, frameworks, Python environments and GPU counts."""
        return self._form_request().changed(
            **rules.axes(self.checked_devices(), self.frameworks.checked(), self.pythons.checked(), self.gpus.counts()),
            rounds=self.advanced_section.rounds())

    def plan(self, **changes):
        """The engine's plan of the form's request with `changes` (the Preferences' settings; session.Plan);
        UserError: why nothing can run."""
        return self.plan_of(self.request().changed(**changes))

    def plan_of(self, request: RunRequest):
        """The engine's plan of another request (a script, a tool's stored setup) on the devices the form knows."""
        from ...engine.run import session

        return session.plan_request(request, here=self.here())

    def here(self):
        """What the catalogue found of this machine (session.Here): the plan needs not probe it again."""
        from ...engine.run import session

        return session.Here(known=self.devices.devices(), mlx=dict(self.frameworks.status))

    def configs(self) -> list:
        """The runs the form's setup plans (the engine's RunConfigs, one per checked device and framework); []
        before the catalogue, or where the plan refuses (configs_to_run says why)."""
        if not self._loaded:
            return []
        try:
            return self.plan().configs
        except UserError:
            return []

    def _form_request(self) -> RunRequest:
        """The form's choices on top of the fields it does not show."""
        base = self._base.settings
        model = self.models.current()
        if model in (None, CHOOSE_FILE):
            model = base.model
        options = {k: v for k, v in base.options.items() if k not in ("finetune", "quantize")}
        if self.facts.is_model_folder(model):  # a model folder's fine-tuning (Training ▸ Fine-tuning)
            options["finetune"] = self.training.finetune()
            if self.training.quantize() is not None and "mlx" in self.frameworks.checked():
                options["quantize"] = self.training.quantize()  # Training ▸ MLX weights
        return self._base.changed(model=model, dataset=self.datasets.current() or base.dataset,
                                  **self.training.fields(), **self.advanced_section.fields(self.training.by_epoch),
                                  options=options, **self.inputs.fields(self._input_kind()))

    def apply_config(self, config: RunConfig, devices: list[str] | None = None) -> None:
        """Set the form from a config (restoring the last setup); `devices`: every device to check (a comparison).

        Before set_catalog it waits for the catalog."""
        self._pending_devices = devices
        if config.framework == "mlx" and self.frameworks.mlx_check.isEnabled():
            self.frameworks.mlx_check.setChecked(True)
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
        self.models.select(config.model)
        self.datasets.select(config.dataset)
        if check_all_available:
            self.devices.check()
        else:
            known = {device.id for device in self.devices.devices() if device.available}
            wanted = set(self._pending_devices or [config.device]) & known
            if wanted:
                self.devices.check(wanted)
        self.devices.check_one_at_least()  # the config's device is gone (a restored MPS setup on another machine)
        needs_own = config.input_shape is None and config.image_size and str(config.dataset).lower() == "synthetic"
        self.inputs.apply(config, self.facts.model_default_spec(config.model) if needs_own else None)
        self.training.apply(config, self.devices.checked())
        self.advanced_section.apply(config)
        self._update_button()

    # -- state -----------------------------------------------------------------------------------------------------
    def set_running(self, running: bool) -> None:
        """Disable editing while a run is in progress; the Run button becomes Stop meanwhile."""
        self._running = running
        self.footer.set_running(running)
        self._update_enabled()

    def set_stopping(self) -> None:
        """Stop was asked for: the button says so until the run ends."""
        self.footer.stopping = True
        self._update_button()

    def _update_enabled(self) -> None:
        self._form.setEnabled(self._loaded and not self._running)
        self._update_button()

    def _update_button(self) -> None:
        if self._running:
            self.footer.show_running()
            return
        checked = self.devices.checked()
        pythons = len(self.pythons.checked())
        problem = rules.run_problem(self.input_problem() if self._loaded else "", pythons, "")
        blocking = self.guard() if self._loaded and not problem and checked else None
        if blocking is not None and blocking.blocking:
            problem = blocking.sentence
        self.footer.show_ready(rules.run_words(checked, pythons, self.gpus.counts(), run_target), self._loaded,
                               bool(checked), problem)

    def _emit_changed(self, *_args) -> None:
        if self._quiet:
            return
        self._refresh()
        self.changed.emit()

    def changeEvent(self, event: QEvent) -> None:  # Qt override
        """Follow a light/dark switch: the primary button's colours come from the palette."""
        super().changeEvent(event)
        if hasattr(self, "footer") and event.type() in (QEvent.Type.PaletteChange,
                                                        QEvent.Type.ApplicationPaletteChange):
            self.footer.restyle()
