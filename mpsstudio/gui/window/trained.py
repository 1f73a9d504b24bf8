"""Trained models of the last Run: where each is kept, and saving one where the user says."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import time
from pathlib import Path

from PySide6.QtCore import QObject

from PySide6.QtWidgets import QFileDialog

from ...engine.basics.errors import UserError

if TYPE_CHECKING:
    from .main_window import MainWindow


class TrainedModels(QObject):
    """The last Run's trained models, kept in the cache folder (removed at the next Run and at Quit), and Save
    Trained Model…."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w

    def slots(self, configs) -> list:
        """Where each training run of this Run keeps its trained model, in the cache folder; the last Run's
        models are kept (until the next Run or Quit), older ones are removed. None for an inference run."""
        from ...engine.basics.paths import cache_dir

        folder = cache_dir() / "trained-models"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.forget(folder)
        except OSError:
            return [None] * len(configs)  # nothing can be kept: Save Trained Model… will say so
        self.w.state.forget_trained()
        stamp = f"{os.getpid()}-{int(time.time() * 1000)}"
        return [str(folder / f"{stamp}-{i}.pt") if c.mode == "train" and not c.is_script else None
                for i, c in enumerate(configs)]

    @staticmethod
    def forget(folder: Path) -> None:
        """Remove this window's kept models, and any another window left over a day ago (a crash, say)."""
        if not folder.is_dir():
            return
        mine = f"{os.getpid()}-"
        for old in folder.iterdir():
            try:
                if old.suffix in (".pt", ".json") and old.is_file() and (
                        old.name.startswith(mine) or time.time() - old.stat().st_mtime > 86_400):
                    old.unlink()
            except OSError:
                continue

    SAVE_FORMATS = {"PyTorch weights (*.pt)": None, "Core ML package (*.mlpackage)": "coreml",
                    "TorchScript (*.pt)": "torchscript", "torch.export program (*.pt2)": "exported-program"}

    def save(self, path: str | None = None, fmt: str | None = None) -> str | None:
        """Save the current run's trained model where the user says: its weights + JSON (`fmt` None), or exported
        (`fmt`: coreml, torchscript, exported-program; done by the export tool in a run's process, its check in
        the Tools tab). Returns the path written (an export: the path it is being written to)."""
        from ...engine.models import saved as savedmodel

        w = self.w
        runs = w.results.whole_runs(w.results.selected_ids()[:1])
        if not runs:
            w.say("Select a finished training run first; its trained model can be saved.")
            return None
        run = runs[0]
        kept = w.state.trained.get(run.id) or run.summary.saved_model
        if run.status != "finished" or run.config.mode != "train" or not kept:
            why = run.summary.saved_model_error or (
                "only a finished training run of the last Run has its model kept; run it again to save it")
            w.say(f"No trained model to save: {why}.")
            return None
        if path is None:
            from ...engine.tools.deploy.export import FORMATS

            name = f"{run.config.model}-{run.config.dataset}-{run.config.device.replace(':', '')}.pt"
            path, chosen = QFileDialog.getSaveFileName(w, "Save Trained Model", str(Path.home() / name),
                                                       ";;".join(self.SAVE_FORMATS))
            if not path:
                return None
            fmt = self.SAVE_FORMATS.get(chosen)
            suffix = FORMATS[fmt] if fmt else ".pt"
            if fmt and path.endswith(".pt") and suffix != ".pt":
                path = path[:-3]
            if not path.endswith(suffix):
                path += suffix
        if fmt:  # the kept weights (and their JSON) are what the export builds the model from
            w.export_model(weights=str(kept), path=path, fmt=fmt, config=run.config)
            w.say(f"Exporting the trained model to {Path(path).name}; its check against PyTorch appears in "
                     "Tools.")
            return path
        try:
            written = savedmodel.copy_saved(kept, path)
        except UserError as exc:
            w.say(str(exc))
            return None
        w.say(f"Saved the trained model to {written.name} and {savedmodel.meta_path(written).name}.")
        return str(written)
