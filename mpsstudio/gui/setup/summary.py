"""The setup's one-line summary."""

from __future__ import annotations

from pathlib import Path

from ...engine.basics.config import precision_note
from ...engine.basics.formatting import error_line, fmt_bytes, fmt_count, plural
from ...engine.basics.spec import DataSpec
from ...engine.machine.apple import MPS_COMPILE_NOTE
from .form import LOADING_TEXT
from .rules import CHOOSE_FILE, MODEL_FILE_WARNING


def dataset_facts(info, spec: DataSpec | None) -> str:
    """'shapes · 6,000 + 1,000 images · 1×28×28 · 10 classes' from a DatasetInfo's fields."""
    if info.spec is None:  # synthetic: `spec` is what the engine makes for the model (run.setup.synthetic_input)
        if spec is None:
            return f"{info.name} · random data shaped for the model · throughput only, no learning"
        sample = (f"random {spec.channels}×{spec.height}×{spec.width} images" if spec.kind == "image" else
                  f"random sequences of {spec.seq_len:,} tokens (vocabulary {spec.vocab_size:,})")
        return " · ".join([info.name, sample, plural(spec.num_classes, "class", "classes"),
                           "throughput only, no learning"])
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


class SummaryMixin:
    """The line under the form: the dataset's facts and the model's parameter count (from the engine's structured fields, never its text), and the warnings that apply."""

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
        if model in (None, CHOOSE_FILE) or dataset is None:
            return ""
        spec, facts = self._dataset_spec_and_facts(model, dataset)
        model_name = self._model_title(model)
        params = self._parameters(model, spec)
        # a folder's line already names the model its size is for: the model once
        lead = facts if facts.endswith(f" for {model_name}") else f"{facts} — {model_name}"
        if isinstance(params, int):
            text = f"{lead} · {fmt_count(params)} parameters"
            macs = self._macs(model, spec)
            if macs:
                text += f" · {fmt_count(macs)} MACs a sample (counted)"
        elif params:
            text = f"{lead}: {params}"
        else:
            text = lead
        if model not in self._model_infos and not self._is_model_folder(model):
            text += f"\n{MODEL_FILE_WARNING}"
        if self.compile_check.isChecked() and any(d.kind == "mps" for d in self._checked_device_objects()):
            text += f"\n{MPS_COMPILE_NOTE}"
        notes = {precision_note(c) for c in self.configs()} - {""}
        return text + "".join(f"\n{note}" for note in sorted(notes))

    def _model_title(self, model: str) -> str:
        return model if model in self._model_infos else Path(model).name

    def _dataset_spec_and_facts(self, model: str, dataset: str) -> tuple[DataSpec | None, str]:
        info = self._dataset_infos.get(dataset)
        if info is not None:
            if info.spec is None:  # synthetic: the engine's sample for the model and the Input and Classes rows
                return self._synthetic_spec(model, info)
            return info.spec, dataset_facts(info, info.spec)
        report = self._folder_reports.get(dataset)
        name = Path(dataset).expanduser().name or dataset
        if report is None:
            return None, name
        preferred = getattr(self._model_infos.get(model), "preferred_image_size", None)
        spec = report.spec(self._base.settings.image_size or preferred)
        try:
            from ...engine.models import registry as models

            size = models.input_size_for_folder(model, report, self._base.settings.image_size)  # what the model gets
        except Exception:  # a model file not read yet, an unknown model: the folder's own size
            size = None
        return spec, folder_facts(name, report, size, model)

    def _synthetic_spec(self, model: str, info) -> tuple[DataSpec | None, str]:
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
        info = self._model_infos.get(model)
        if info is not None:
            return info.default_spec
        try:
            from ...engine.models import registry as models

            return models.get_model_info(model).default_spec
        except Exception:
            return None

    def _macs(self, model: str, spec: DataSpec) -> int | None:
        """Multiply-adds of one sample's forward pass of a built-in model (the engine counts them on the meta device;
        a user's file is never run here), cached."""
        from ...engine.models import registry as models

        key = ("macs", model, spec)
        if key not in self._param_cache:
            try:
                self._param_cache[key] = models.macs_per_sample(model, models.input_spec_for(model, spec))
            except Exception:
                self._param_cache[key] = None
        return self._param_cache[key]

    def _parameters(self, model: str, spec: DataSpec | None) -> int | str:
        """The model's parameter count for the data (cached); the error's sentence if it cannot be built."""
        if spec is None:
            return ""
        from ...engine.models import registry as models
        from ...engine.basics.errors import UserError

        if self._is_model_folder(model):  # its safetensors' headers, nothing loaded
            from ...engine.models.hf_folder import read_folder

            try:
                return read_folder(model).stored or ""  # its headers, read once by the folder's checks
            except UserError as exc:
                return str(exc)
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
