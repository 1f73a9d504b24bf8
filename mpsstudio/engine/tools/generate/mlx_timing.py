"""Generation speed in MLX, the way an MLX user generates: mlx-lm's `generate_step` (what `mlx_lm.generate` and
`stream_generate` call), greedy (its `greedy_sampler`), with its key/value cache, on the same prompt ids as the
PyTorch side (timing.py: random, seeded) and the same number of new tokens; end-of-text never stops it (generate_step
does not look for it).

Each repetition makes the same two calls as PyTorch's, each timed from a synchronized MLX stream to the moment the
call hands back its last wanted token (`generate_step` yields `y.item()`: the token is computed by then):
- one token: the **time to the first token** (the prompt in mlx-lm's chunks of 2,048, the first token chosen);
- `new_tokens` tokens: the whole generation; beyond the first call, the **decode** of the other `new_tokens - 1`.
mlx-lm computes one token ahead (`mx.async_eval` of the next step before it yields): that step is left to finish,
outside the clock, before the next call starts, so it never counts into the next one. The model's weights are cast
to the precision (`Module.set_dtype`, as `mlx_lm.convert --dtype` does), then, with --quantize, quantized in 4 or 8
bits as `mlx_lm.convert -q` does (models/mlx_lm_folder.quantize: the scales in the precision); fp32 matrix products
are full fp32 unless the tool's config asks TF32 (machine/mlx.set_tf32, as an MLX run)."""

from __future__ import annotations

import time

from ...basics.errors import UserError
from ...basics.formatting import printable
from ...machine import mlx as mlx_machine
from .figures import FIRST_TOKENS, FIRST_WARMUP_S, figures

BATCH_NOTE = ("MLX: mlx-lm's generate_step makes one sequence at a time (its batch_generate schedules requests, "
              "another measure); batch {batch} not measured")


def load(folder, precision: str, bits: int | None = None):
    """(the folder's causal LM in mlx-lm (models/mlx_lm_folder.load: strict, never a custom model file), its weights
    cast to `precision` and, given `bits`, quantized; what quantizing did, or None)."""
    import mlx.core as mx

    from ...models import mlx_lm_folder

    if folder.task != "causal LM":
        raise UserError(f"{folder.architecture} is a {folder.task} model; generation speed is measured for a causal "
                        "LM.")
    loaded = mlx_lm_folder.load(folder.path)
    loaded.model.set_dtype({"fp32": mx.float32, "bf16": mx.bfloat16, "fp16": mx.float16}[precision])
    quantized = mlx_lm_folder.quantize(loaded, bits).record() if bits else None
    loaded.model.eval()
    mx.eval(loaded.model.parameters())
    return loaded, quantized


def quantized_note(where: str, q: dict) -> str:
    """"MLX \u00b7 cpu fp32 4-bit: 4-bit weights as mlx-lm's convert -q makes them (affine, groups of 64) in 16 layers,
    parameters 453 KiB -> 84 KiB; not PyTorch's arithmetic: its greedy tokens may part from PyTorch's"."""
    from ...models.mlx_lm_folder import quantized_words

    return (f"{where}: {q['bits']}-bit weights as mlx-lm's convert -q makes them {quantized_words(q)}; not PyTorch's "
            "arithmetic: its greedy tokens may part from PyTorch's by more than rounding")


def _call(model, prompt, new_tokens: int, stream) -> tuple[float, list[int]]:
    """(seconds from a synchronized stream to the last wanted token handed back, the tokens)."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    mx.synchronize(stream)
    start = time.perf_counter()
    steps = generate_step(prompt, model, stream, max_tokens=new_tokens)
    tokens = [int(token) for token, _ in steps]
    took = time.perf_counter() - start
    mx.synchronize(stream)  # mlx-lm's step ahead, finished off the clock
    return took, tokens


def measure(loaded, dev: mlx_machine.MlxDevice, ids, context: int, new_tokens: int, repeats: int,
            should_stop=None, base: int = 0, warm_s: float = 0.0) -> dict:
    """One MLX setup at one context, as timing.measure's row: `ids` the PyTorch side's prompt (its first sequence)."""
    import mlx.core as mx

    prompt = mx.array(ids[0, :context].cpu().numpy().astype("int32"))
    stream = mx.new_stream(dev.mx_device())
    model = loaded.model
    first: list[float] = []
    whole: list[float] = []
    dev.reset_peak()
    warm_until = time.perf_counter() + warm_s
    while True:  # the warm-up, never counted: its greedy tokens are the setup's
        _call(model, prompt, 1, stream)
        _, tokens = _call(model, prompt, new_tokens, stream)
        if time.perf_counter() >= warm_until:
            break
    for _ in range(repeats):
        if should_stop is not None and should_stop() and first:
            break
        t1, _ = _call(model, prompt, 1, stream)
        tn, out = _call(model, prompt, new_tokens, stream)
        if len(out) != new_tokens:
            raise UserError(f"mlx-lm's generate_step made {len(out)} new tokens where {new_tokens} were asked.")
        first.append(t1)
        whole.append(tn)
    reading = dev.memory()
    decode = [w - f for f, w in zip(first, whole)]
    told = bool(decode) and all(d > 0 for d in decode)
    peak = max(0, dev.in_use(reading) - base) if dev.kind == "cpu" else reading.get("peak")
    row = {"framework": "mlx", "context": context, "new_tokens": new_tokens, "batch": 1, "repeats": len(first),
           "first_s": first, "whole_s": whole, "first_tokens": tokens[:FIRST_TOKENS], "peak_memory": peak or None,
           "memory_measure": dev.memory_measure()}
    row.update(figures(first, decode if told else [], context, new_tokens, 1))
    if not told:
        row["decode_note"] = (f"too short to tell: generating {new_tokens:,} tokens took no longer than the first "
                              "one in some repetitions; ask more --new-tokens")
    return row


def run_setups(folder, name: str, payload: dict, contexts: list[int], prompt_of, tf32: bool, should_stop, progress,
               done, bits: int | None = None) -> tuple[list[dict], list[str]]:
    """Every precision x context of `payload` on MLX's `name` device, its weights in `bits` where given; (rows,
    notes): what cannot run is said. `prompt_of(context)`: the PyTorch side's prompt ids; `done()`: counts a measured
    setup for the progress."""
    import mlx.core as mx

    rows: list[dict] = []
    notes: list[str] = []
    batch = payload.get("batch") or 1
    if batch != 1:
        return rows, [BATCH_NOTE.format(batch=batch)]
    from ...models.mlx_lm_folder import plan_reason

    try:
        why = plan_reason(str(folder.path), {})
        if why:
            raise UserError(why)
        mlx_machine.set_tf32(tf32)
        dev = mlx_machine.resolve(name)
    except UserError as exc:
        return rows, [f"MLX · {printable(name)}: {str(exc).rstrip('.')}; not measured"]
    arithmetic = mlx_machine.arithmetic(dev.kind, tf32)
    mx.set_default_device(dev.mx_device())
    for prec in payload["precisions"]:
        base = dev.in_use(dev.memory()) if dev.kind == "cpu" else 0
        try:
            loaded, quantized = load(folder, prec, bits)
        except UserError as exc:  # what PyTorch measured before is kept
            return rows, [*notes, f"MLX · {dev.id} {prec}: {str(exc).rstrip('.')}; not measured"]
        notes += [f"MLX: mlx-lm {note}" for note in loaded.notes if f"MLX: mlx-lm {note}" not in notes]
        if quantized:
            notes.append(quantized_note(f"MLX · {dev.id} {prec} {bits}-bit", quantized))
        if prec == "fp32" and dev.kind != "cpu":
            notes.append(f"MLX · {dev.id} fp32: {arithmetic.words}")
        for context in contexts:
            if should_stop is not None and should_stop():
                break
            if progress is not None:
                progress(f"MLX · {dev.id} {prec}: generating after {context:,} tokens of context")
            row = measure(loaded, dev, prompt_of(context), context, payload["new_tokens"], payload["repeats"],
                          should_stop, base, FIRST_WARMUP_S if context == contexts[0] else 0.0)
            rows.append({"device": dev.id, "precision": prec, **row, **({"quantize": bits} if bits else {})})
            done()
        del loaded
        mx.clear_cache()
    return rows, notes
