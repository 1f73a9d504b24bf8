"""Stored runs drawn the way they were drawn live: each run replayed through the live plots' own calls (start_run,
add_warmup, add_window per stored window, add_epoch, finish_run), so a reopened run looks as it did live and a
failed run's steps after its last window are drawn too."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .axes import number, positive
from .plot_runs import MEMORY_LINES


def legend_labels(results: Sequence) -> list[str]:
    """Each run by its device, and by machine and setup where the runs drawn together differ in them."""
    machines = {r.machine for r in results}
    setups = {(r.config.model, r.config.dataset, r.config.batch_size, r.config.precision) for r in results}
    torches = {str(r.env.get("torch")) for r in results}
    tunings = {str(r.config.options.get("finetune", "full")) for r in results}
    tunings_words = {"lora": "LoRA", "head": "head only"}
    inputs = {str(r.config.input_shape) for r in results}  # a language model's sequence lengths, say
    labels = []
    for r in results:
        label = r.config.where  # "cpu", or an MLX run's "MLX · cpu"
        if len(machines) > 1:
            label += f" · {r.machine}"
        if len(torches) > 1:
            label += f" · torch {r.env.get('torch') or '?'}"
        if len(setups) > 1:
            label += f" · {r.config.model} {r.config.batch_words}"
        if len(inputs) > 1:
            shape = r.config.input_shape
            label += (" · model's input" if not shape else f" · {shape[0]:,} tokens" if len(shape) == 1 else
                      " · " + "×".join(str(v) for v in shape))
        if len(tunings) > 1:  # a model folder's runs in full and with LoRA
            label += f" · {tunings_words.get(str(r.config.options.get('finetune')), 'full')}"
        labels.append(label)
    return labels


def power_note(results: Sequence) -> str:
    """Why none of these runs has a power curve ("" when one has, or there is nothing to say)."""
    notes = [str(r.summary.energy_reason or "") for r in results if not r.summary.energy_j]
    if not (notes and notes[0] and len(notes) == len(results)):
        return ""
    return "Power " + (notes[0] if notes[0].lower().startswith("not measured") else f"not measured: {notes[0]}")


def draw(plots, r, label: str) -> None:
    """One stored run (a whole RunResult: steps, windows, epochs) on `plots` (a LivePlots)."""
    s = r.summary
    losses = list(r.losses)
    warm = int(s.warmup_steps or 0) if isinstance(s.warmup_steps, (int, float)) else 0
    warm = max(0, min(warm, len(losses)))
    plots.start_run(r.id, label, warm, s.tokens_per_step)
    warmup_s = s.warmup_s
    plots.add_warmup(r.id, losses[:warm], warmup_s if isinstance(warmup_s, (int, float)) else None)
    drawn = warm
    for w in r.windows:
        first, steps = w.first_step, w.steps
        if first is None or steps is None or first < 1:
            continue
        if first - 1 > drawn:  # steps between windows (none in a run of this version): drawn as they are
            plots.append_losses(r.id, drawn + 1, losses[drawn:first - 1])
        window_losses = losses[first - 1:first - 1 + steps]
        energy_j, energy_s = w.energy_j, w.energy_s
        power = energy_j / energy_s if positive(energy_j) and positive(energy_s) else None
        sps = w.samples_per_s
        plots.add_window(r.id, first, window_losses, sps if number(sps) else math.nan,
                         w.memory if number(w.memory) else math.nan, power,
                         seconds=w.seconds if number(w.seconds) else None,
                         lines={k: getattr(w, k) for k in MEMORY_LINES if number(getattr(w, k))})
        drawn = max(drawn, first - 1 + len(window_losses))
    if drawn < len(losses):  # a failed run's steps after its last window: what it measured until it failed
        plots.append_losses(r.id, drawn + 1, losses[drawn:])
    for e in r.epochs:
        step = r.epoch_step(e)
        if step is not None and number(e.val_loss):
            plots.add_epoch(r.id, step, e.val_loss)
    plots.finish_run(r.id, r.status)
