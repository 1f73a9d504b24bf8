"""The setup's summary line and what it reads (SetupFacts: the catalogue's models, datasets and folders, the
models' counts), without a widget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...engine.basics.formatting import error_line, fmt_bytes, fmt_count, plural
from ...engine.basics.config import RunConfig
from ...engine.basics.spec import DataSpec
from .rules import MODEL_FILE_WARNING


def labels_words(spec: DataSpec, task: str = "") -> str:
    """What the model predicts: "10 classes", or a language model's "causal LM, vocabulary 50,257"."""
    if task in LANGUAGE_TASKS:
        return f"{task}, vocabulary {spec.vocab_size:,}"
    return plural(spec.num_classes, "class", "classes")


LANGUAGE_TASKS = ("causal LM", "masked LM")  # a model folder's tasks that predict tokens, not classes


def dataset_facts(info, spec: DataSpec | None, task: str = "") -> str:
    """'shapes · 6,000 + 1,000 images · 1×28×28 · 10 classes' from a DatasetInfo's fields; `task`: a model folder's
    (a language model predicts tokens: its vocabulary is said, not classes)."""
    if info.spec is None:  # synthetic: `spec` is what the engine makes for the model (run.setup.synthetic_input)
        if spec is None:
            return f"{info.name} · random data shaped for the model · throughput only, no learning"
        sample = (f"random {spec.channels}×{spec.height}×{spec.width} images" if spec.kind == "image" else
                  f"random sequences of {spec.seq_len:,} tokens" + ("" if task in LANGUAGE_TASKS else
                                                                   f" (vocabulary {spec.vocab_size:,})"))
        return " · ".join([info.name, sample, labels_words(spec, task), "throughput only, no learning"])
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


class SetupFacts:
    """What the catalogue found and what the form reads of it, without a widget: the models, datasets and checked
    folders (their FolderReports; None: not checked yet), each model's parameter count and MACs (counted once, from
    the engine's structured fields), and the dataset's facts for the summary line."""

    def __init__(self) -> None:
        self.model_infos: dict = {}
        self.dataset_infos: dict = {}
        self.folder_reports: dict[str, object] = {}  # folder path -> the engine's FolderReport (None: unchecked)
        self.text_summaries: dict[str, dict] = {}  # a text dataset's path -> the engine's run.setup.text_summary
        self.counted: dict[tuple, int | str | None] = {}

    def spec_and_facts(self, model: str, dataset: str, image_size: int | None, settings: Callable[[], RunConfig],
                       problem: str) -> tuple[DataSpec | None, str]:
        """The data's spec for `model` and the words on it: a catalogue dataset's own, a folder's (at `image_size`),
        or synthetic data's from the engine's sample for the model and the form's `settings()`; `problem`: the Input
        row's sentence where its text is not a shape."""
        info = self.dataset_infos.get(dataset)
        if info is None:
            return self.folder_spec_and_facts(model, dataset, image_size)
        if info.spec is not None:
            return info.spec, dataset_facts(info, info.spec)
        from ...engine.basics.errors import UserError
        from ...engine.run.setup import synthetic_input

        if problem:
            return None, f"{info.name}: {problem}"
        try:
            spec = synthetic_input(settings().changed(model=model))
        except UserError as exc:
            return None, f"{info.name}: {exc}"
        except Exception:  # a model file that cannot be read yet: its own words come with Run
            return self.model_default_spec(model), dataset_facts(info, None)
        return spec, dataset_facts(info, spec, self.folder_task(model))

    def folder_task(self, model) -> str:
        """A model folder's task as its config says ("causal LM"), "" for any other model."""
        if not self.is_model_folder(model):
            return ""
        try:
            from ...engine.models.hf_folder import read_folder

            return read_folder(model).task
        except Exception:  # a folder that cannot be read: its sentence comes with Run
            return ""

    def is_model_folder(self, model) -> bool:
        """A Hugging Face model folder chosen as the model (a built-in's name is never looked up on disk)."""
        from ...engine.models.hf_folder import is_model_folder

        return (isinstance(model, str) and model not in self.model_infos and not model.endswith(".py")
                and is_model_folder(model))

    def model_title(self, model: str) -> str:
        return model if model in self.model_infos else Path(model).name

    def model_default_spec(self, model: str) -> DataSpec | None:
        info = self.model_infos.get(model)
        if info is not None:
            return info.default_spec
        try:
            from ...engine.models import registry as models

            return models.get_model_info(model).default_spec
        except Exception:
            return None

    def folder_spec_and_facts(self, model: str, dataset: str, image_size: int | None) -> tuple[DataSpec | None, str]:
        """A folder dataset's sample for `model` and its facts ("pets · 2 classes · ..."): its name alone until its
        report comes."""
        report = self.folder_reports.get(dataset)
        name = Path(dataset).expanduser().name or dataset
        text = self.text_summaries.get(dataset)
        if text is not None:  # tokenized by the model folder's tokenizer (the engine's summary)
            spec = DataSpec("tokens", 2, seq_len=text["seq_len"], vocab_size=text["vocab_size"])
            return spec, " · ".join([name, f"{text['training_tokens']:,} training tokens",
                                     f"{text['layout']} in sequences of {text['seq_len']:,}",
                                     f"{text['train_rows']:,} + {text['val_rows']:,} sequences",
                                     labels_words(spec, "causal LM")])
        if report is None:
            return None, name
        preferred = getattr(self.model_infos.get(model), "preferred_image_size", None)
        spec = report.spec(image_size or preferred)  # type: ignore[attr-defined]
        try:
            from ...engine.models import registry as models

            size = models.input_size_for_folder(model, report, image_size)  # what the model gets
        except Exception:  # a model file not read yet, an unknown model: the folder's own size
            size = None
        return spec, folder_facts(name, report, size, model)

    def macs(self, model: str, spec: DataSpec | None) -> int | None:
        """Multiply-adds of one sample's forward pass of a built-in model (the engine counts them on the meta device;
        a user's file is never run here), counted once; None without the data's spec."""
        from ...engine.models import registry as models

        if spec is None:
            return None

        key = ("macs", model, spec)
        if key not in self.counted:
            try:
                self.counted[key] = models.macs_per_sample(model, models.input_spec_for(model, spec))
            except Exception:
                self.counted[key] = None
        found = self.counted[key]
        return found if isinstance(found, int) else None

    def parameters(self, model: str, spec: DataSpec | None, file_parameters) -> int | str:
        """The model's parameter count for the data (counted once); the error's sentence if it cannot be built.
        `file_parameters(model, spec)`: a user's file's, from its check in a process of its own (model_files.py)."""
        if spec is None:
            return ""
        from ...engine.basics.errors import UserError
        from ...engine.models import registry as models

        if self.is_model_folder(model):  # its safetensors' headers, nothing loaded
            from ...engine.models.hf_folder import read_folder

            try:
                return read_folder(model).stored or ""  # its headers, read once by the folder's checks
            except UserError as exc:
                return str(exc)
        if model not in self.model_infos:  # a user's file: never run here (model_files.py)
            try:
                return file_parameters(model, models.input_spec_for(model, spec))
            except UserError as exc:
                return str(exc)
        key = (model, spec)
        if key not in self.counted:
            try:
                self.counted[key] = models.parameter_count(model, models.input_spec_for(model, spec))
            except UserError as exc:
                self.counted[key] = str(exc)
            except Exception as exc:
                self.counted[key] = f"the model could not be built ({error_line(exc, 120)})"
        return self.counted[key] or ""

    def line(self, model: str, facts: str, params: int | str, macs: int | None) -> str:
        """The summary's first line: the data's facts, the model, its parameters and MACs (or why not), and the
        warning a model file carries."""
        name = self.model_title(model)
        lead = facts if facts.endswith(f" for {name}") else f"{facts} — {name}"  # a folder's line names it once
        if isinstance(params, int):
            text = f"{lead} · {fmt_count(params)} parameters"
            if macs:
                text += f" · {fmt_count(macs)} MACs a sample (counted)"
        elif params:
            text = f"{lead}: {params}"
        else:
            text = lead
        if model not in self.model_infos and not self.is_model_folder(model):
            text += f"\n{MODEL_FILE_WARNING}"
        return text
