"""What happens between epochs, outside the timed windows: validation (loss, accuracy and the (true, predicted) counts,
summed on the device and fetched once), early stopping on a validation figure, the best epoch's weights (kept on
the CPU), and the evaluation a run keeps at its end."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..basics.config import RunConfig
from ..basics.results import Evaluation
from ..data.tokens import IGNORE

MAX_EVAL_CLASSES = 100  # a confusion matrix is kept up to this many classes (10,000 cells)


class EarlyStop:
    """Early stopping on a validation figure: the best value, its epoch, and epochs since it improved.
    Active when the config asks for early stopping or for the best epoch (keep_best)."""

    def __init__(self, config: RunConfig):
        self.patience = config.early_stop_patience
        self.monitor = config.early_stop_monitor
        self.mode = config.monitor_mode
        self.active = config.early_stop_patience is not None or config.keep_best
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.since = 0
        self.last_epoch = 0
        self.stopped_at: int | None = None

    def add(self, epoch: int, value: float | None) -> bool:
        """One epoch's value (None: not measured, never an improvement); True when it is the best so far."""
        self.last_epoch = epoch
        better = value is not None and math.isfinite(value) and (
            self.best is None or (value > self.best if self.mode == "max" else value < self.best))
        if better:
            self.best, self.best_epoch, self.since = value, epoch, 0
        else:
            self.since += 1
        return better

    def should_stop(self) -> bool:
        if self.patience is not None and self.since >= self.patience:
            self.stopped_at = self.last_epoch
            return True
        return False

    def summary(self) -> dict:
        """What the run's summary says about it (engine/analysis/summary.py copies these fields)."""
        out = {"best_epoch": self.best_epoch, "best_value": self.best, "monitor": self.monitor,
               "stopped_early_epoch": self.stopped_at}
        if self.stopped_at is not None:
            best = f"{self.best:.4g} at epoch {self.best_epoch}" if self.best is not None else "none measured"
            out["stopped_early_reason"] = (f"{self.monitor} did not improve for {self.patience} epochs "
                                           f"(mode {self.mode}; best {best})")
        return out


class Epochs:
    """Validation after each epoch, early stopping, the best checkpoint and the final evaluation of one run."""

    def __init__(self, config: RunConfig, model: torch.nn.Module, forward, autocast, val_batches, tdev,
                 num_classes: int, data):
        self.config, self.model, self.forward, self.autocast = config, model, forward, autocast
        self.val_batches, self.tdev, self.num_classes, self.data = val_batches, tdev, num_classes, data
        self.watch = EarlyStop(config) if config.mode == "train" else None
        self.val: tuple[float, float] | None = None
        self.best_state: dict | None = None  # the best epoch's weights, on the CPU (keep_best)
        self.confusion: torch.Tensor | None = None  # the last validation's (true, predicted) counts, on the device
        self.best_confusion: torch.Tensor | None = None

    def validate(self) -> tuple[float, float] | None:
        """Validation loss and accuracy, summed on the device and fetched once (None without a validation split)."""
        if self.val_batches is None:
            return None
        if self.data.text is not None:
            return self._validate_text()
        was_training = self.model.training
        self.model.eval()
        loss_sum = torch.zeros((), device=self.tdev)
        correct = torch.zeros((), device=self.tdev)
        classes = self.num_classes
        confusion = None
        if self.data.spec.kind == "image" and 1 < classes <= MAX_EVAL_CLASSES and self.data.name != "synthetic":
            confusion = torch.zeros(classes * classes, dtype=torch.int64, device=self.tdev)
        n = 0
        with torch.inference_mode(), self.autocast():
            for x, y in self.val_batches.epoch():
                out = self.forward(x)
                loss_sum += F.cross_entropy(out.float(), y, reduction="sum")
                predicted = out.argmax(1)
                correct += (predicted == y).sum()
                if confusion is not None:  # (true, predicted) pairs, counted on the device: no sync here
                    confusion += torch.bincount(y * classes + predicted, minlength=classes * classes)
                n += int(y.shape[0])
        self.confusion = confusion
        self.model.train(was_training)
        if n == 0:
            return None
        loss, right = torch.stack([loss_sum, correct.float()]).cpu().tolist()
        return loss / n, right / n

    def _validate_text(self) -> tuple[float, float] | None:
        """A language model's validation on text: the mean cross-entropy of each learnt next token (padding and
        prompts excluded: label -100) and the share of them its top choice gets right, summed on the device and
        fetched once. exp of the loss is the perplexity (perplexity())."""
        was_training = self.model.training
        self.model.eval()
        loss_sum = torch.zeros((), device=self.tdev)
        correct = torch.zeros((), device=self.tdev)
        counted = torch.zeros((), device=self.tdev)
        with torch.inference_mode(), self.autocast():
            for inputs, labels in self.val_batches.epoch():
                given = {k: v for k, v in inputs.items() if k != "labels"}
                logits = self.forward(**given).logits[:, :-1].float()
                target = labels[:, 1:]
                learnt = target != IGNORE
                loss_sum += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                            ignore_index=IGNORE, reduction="sum")
                correct += ((logits.argmax(-1) == target) & learnt).sum()
                counted += learnt.sum()
        self.model.train(was_training)
        loss, right, n = torch.stack([loss_sum, correct.float(), counted.float()]).cpu().tolist()
        return (loss / n, right / n) if n else None

    def after_epoch(self, epoch: int) -> bool:
        """Early stopping and the best checkpoint after an epoch's validation; True to stop now."""
        if self.watch is None or not self.watch.active:
            return False
        value = None
        if self.val is not None:
            value = self.val[1] if self.config.early_stop_monitor == "val_accuracy" else self.val[0]
        improved = self.watch.add(epoch, value)
        if improved:
            self.best_confusion = self.confusion
            if self.config.keep_best:
                self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        return self.watch.should_stop()

    def finish(self, epochs_run: int) -> Evaluation | None:
        """After the last step: the best epoch's weights back in the model (keep_best), and the evaluation the run
        keeps (None without one)."""
        cfg = self.config
        if cfg.keep_best and self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        counts = self.best_confusion if (cfg.keep_best and self.best_confusion is not None) else self.confusion
        if counts is None:
            return None
        n = self.num_classes
        matrix = counts.cpu().view(n, n).tolist()
        epoch = self.watch.best_epoch if (cfg.keep_best and self.watch is not None and self.watch.best_epoch) \
            else epochs_run or None
        return Evaluation(classes=[str(c)[:200] for c in self.data.classes][:n], matrix=matrix, epoch=epoch,
                          split="validation")

    def summary(self) -> dict:
        """Early stopping's and the best epoch's fields for the run's summary ({} when neither was asked for)."""
        return self.watch.summary() if self.watch is not None and self.watch.active else {}
