"""The setup form's rules, without a widget: what the form's choices imply for the request the engine plans (the
GPU counts only with a CUDA device, PyTorch only with one of its environments, early stopping only per epoch), the
length kept in steps and in epochs, which precisions the checked devices run and why not, the Run button's
words, and the names the form's parts share (the item data of its special entries, the model-file warning). The form (panel.py and its parts) shows what these say; tests/gui/setup/test_rules.py tests them with no Qt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_STEPS = 200
PRECISION_TIPS = {
    "fp32": "Full 32-bit floating point: the reference every device supports.",
    "fp16": "Mixed precision: matrix work in 16-bit floats (torch.autocast), weights kept in fp32.",
    "bf16": "Mixed precision with bfloat16 (torch.autocast): fp32's range with half the bits.",
}
EPOCH_ONLY = ("early_stop_patience", "keep_best")  # what only an epoch run has (a validation after each epoch)
NO_PYTORCH = "Check at least one PyTorch under Devices."
LOADING_TEXT = "Loading PyTorch…"
MODEL_FILE_WARNING = "⚠︎ Loading a model file runs its code; only choose files you trust."
CHOOSE_FILE = "\x00choose-model-file"  # item data of the "Choose .py file…" entry
RUN_SCRIPT = "\x00run-training-script"  # item data of the "Your Training Script…" entry (Run Your Training Script…)


@dataclass
class Length:
    """How long a run is: steps or epochs, each value kept while the other unit is shown."""

    mode: str = "epochs"
    steps: int = DEFAULT_STEPS
    epochs: int = 2

    @property
    def by_epoch(self) -> bool:
        return self.mode == "epochs"

    def shown(self) -> int:
        return self.epochs if self.by_epoch else self.steps

    def switch(self, mode: str) -> bool:
        """Show `mode` ("steps" or "epochs"); whether it changed (then `shown()` is its value)."""
        if mode == self.mode:
            return False
        self.mode = mode
        return True

    def set(self, value: int) -> None:
        """The shown unit's value."""
        if self.by_epoch:
            self.epochs = value
        else:
            self.steps = value

    def fields(self, value: int) -> dict:
        """The request's steps and epochs for the shown `value`."""
        return {"steps": None if self.by_epoch else value, "epochs": value if self.by_epoch else None}

    def restore(self, steps: int | None, epochs: int | None) -> None:
        """A config's length, put back: its unit shown, the other unit's value kept."""
        if steps is not None:
            self.steps, self.mode = steps, "steps"
        else:
            self.epochs, self.mode = epochs or self.epochs, "epochs"


def axes(devices: Sequence[str], frameworks: Sequence[str], pythons: Sequence[str | None],
         counts: Sequence[int]) -> dict:
    """The request's axes the form's choices imply: the GPU counts only where a CUDA device is checked and more
    than one GPU a run is asked for; PyTorch only where one of its environments is checked (MLX runs in MPS
    Studio's own)."""
    counts = [n for n in counts if n > 0]
    ranked = bool(counts) and counts != [1] and any(d.startswith("cuda") for d in devices)
    return {"devices": tuple(devices), "frameworks": tuple(f for f in frameworks if f != "torch" or pythons),
            "gpus": tuple(counts) if ranked else (), "pythons": tuple(pythons)}


def epoch_fields(by_epoch: bool, patience: int, keep_best: bool) -> dict:
    """Early stopping and the best epoch: per epoch, so a steps run leaves them off."""
    return {"early_stop_patience": (patience or None) if by_epoch else None, "keep_best": keep_best and by_epoch}


def precision_state(devices: Sequence, precision: str) -> tuple[bool, str]:
    """(whether every checked device runs `precision`, its tooltip): the reasons it cannot where one cannot, else
    what it is and what each device's caveat says (the engine's machine/precision)."""
    from ...engine.machine import precision as engine_precision

    reasons: list[str] = []
    for device in devices:
        try:
            reason = engine_precision.precision_unsupported_reason(device, precision)
        except Exception as exc:  # a device that cannot even be asked cannot run it either
            reason = f"{precision} could not be checked on {device.id} ({exc})"
        if reason and reason not in reasons:
            reasons.append(reason)
    if reasons:
        return False, "\n".join(reasons)
    caveats = [c for d in devices if (c := engine_precision.precision_caveat(d, precision))]
    return True, "\n".join([PRECISION_TIPS.get(precision, ""), *caveats]).strip()


def run_words(checked: Sequence, pythons: int, counts: Sequence[int], target) -> str:
    """The Run button's words for the checked devices (Device objects), the number of PyTorch environments and
    the GPU counts; `target(device)` names one device ("Apple GPU", "CPU — ...")."""
    if counts and list(counts) != [1] and any(d.kind == "cuda" for d in checked):  # one run on N, or the scaling
        others = [d for d in checked if d.kind != "cuda"]
        return ((f"Run on {counts[0]} GPUs" if len(counts) == 1 else f"Scale over {', '.join(map(str, counts))} GPUs")
                + (f" + {len(others)} device{'s' if len(others) > 1 else ''}" if others else ""))
    if len(checked) > 1:
        return f"Compare {len(checked)} devices" + (f" × {pythons} PyTorch" if pythons > 1 else "")
    if checked and pythons > 1:
        return f"Compare {pythons} PyTorch on {target(checked[0])}"
    if checked:
        return f"Run on {target(checked[0])}"
    return "Run"


def run_problem(input_problem: str, pythons: int, blocking: str) -> str:
    """Why Run is off ("" when it may run): the input's problem, no PyTorch checked, or a guard the run refuses."""
    if input_problem:
        return input_problem
    if not pythons:
        return NO_PYTORCH
    return blocking


def first_guard(configs: Sequence, dataset_infos: dict, folder_reports: dict):
    """The engine's first guard (run.guards) of the form's planned configs, or None: nothing planned, nothing
    wrong, or a model or folder that cannot be read yet (the summary says so)."""
    if not configs:
        return None
    from ...engine.run import guards

    config = configs[0]
    dataset = config.dataset
    try:
        train = guards.train_samples(config, dataset_infos.get(dataset), folder_reports.get(dataset))
        found = guards.guards(config, train, dataset_title(dataset, dataset_infos))
    except Exception:
        return None
    return found[0] if found else None


def train_samples(configs: Sequence, dataset_infos: dict, folder_reports: dict) -> int | None:
    """The training samples the form's setup gets (the engine's run.guards.train_samples), None when unknown."""
    if not configs:
        return None
    from ...engine.run import guards

    dataset = configs[0].dataset
    try:
        return guards.train_samples(configs[0], dataset_infos.get(dataset), folder_reports.get(dataset))
    except Exception:
        return None


def dataset_title(dataset: str, dataset_infos: dict) -> str:
    """A dataset's name as the guard says it: a built-in's, or a folder's last part."""
    info = dataset_infos.get(dataset)
    if info is not None:
        return info.name
    from pathlib import Path

    return Path(dataset).expanduser().name or dataset
