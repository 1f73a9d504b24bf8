"""Generation speed, measured the way a user generates: transformers' `model.generate`, greedy, with its key/value
cache, on a prompt of `context` token ids (random, seeded: the speed of a forward pass does not depend on which ids)
and `new_tokens` new ones, every one of them generated (end-of-text never stops it early).

Each repetition makes two calls, each timed from a synchronized device to a synchronized device:
- `generate(max_new_tokens=1)`: the **time to the first token** (the prompt's forward pass, the first token chosen
  and handed back); **prefill tokens/s** is the prompt's length over it (mlx-lm's and llama.cpp's definition).
- `generate(max_new_tokens=new_tokens)`: the whole generation; what it takes beyond the first call is the **decode**
  of the other `new_tokens - 1` tokens, at contexts `context + 1` to `context + new_tokens - 1` (said with it).
A warm-up repetition comes first, apart (kernels chosen, caches made). Each figure is the median of the repetitions
with its interval (analysis/repeat.median_interval: the range for fewer than 9, else the median's 95 % interval).
The call's own timing is used, not a streamer's: on MPS transformers streams each token one step late
(DeferredStopCheck), which would count a decode step into the first token's time. The MLX side (`--frameworks
torch,mlx`: mlx-lm's generate_step on the same prompt) is mlx_timing.py's, by the same two calls."""

from __future__ import annotations

import time

import torch

from ...basics.errors import UserError
from ...basics.formatting import error_line, printable
from ...machine import devices, precision, probe
from ...run.windows import reading_peak
from .figures import FIRST_TOKENS, FIRST_WARMUP_S, figures

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def load(folder, dtype: torch.dtype):
    """The folder's causal LM in `dtype` (its weights cast, as a user loads it with torch_dtype), for generation."""
    from ...models.hf_model import transformers_module

    if folder.task != "causal LM":
        raise UserError(f"{folder.architecture} is a {folder.task} model; generation speed is measured for a causal "
                        "LM (a model folder whose architecture ends in ForCausalLM or LMHeadModel).")
    auto = transformers_module().AutoModelForCausalLM
    try:
        model = auto.from_pretrained(str(folder.path), local_files_only=True, trust_remote_code=False,
                                     use_safetensors=True, dtype=dtype)
    except (Exception, SystemExit) as exc:
        raise UserError(f"transformers could not load '{printable(folder.path.name)}' ({error_line(exc, 200)}); "
                        "check that save_pretrained wrote it.") from None
    return model.eval()


def _generate(model, ids, mask, new_tokens: int):
    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                          do_sample=False, num_beams=1, use_cache=True, pad_token_id=0, temperature=None,
                          top_p=None, top_k=None)


def timed(dev: devices.Device, call) -> tuple[float, torch.Tensor]:
    """(seconds, what it returned) of `call()`, the device synchronized before the first clock read and after."""
    dev.synchronize()
    start = time.perf_counter()
    out = call()
    dev.synchronize()
    return time.perf_counter() - start, out



def prompt_ids(context: int, batch: int, vocab: int, seed: int) -> torch.Tensor:
    """The prompt: `batch` x `context` random token ids, seeded (every framework and device is given the same)."""
    return torch.randint(0, vocab, (batch, context), generator=torch.Generator().manual_seed(seed))


def measure(model, dev: devices.Device, context: int, new_tokens: int, batch: int, repeats: int, vocab: int,
            seed: int = 0, should_stop=None, base: int = 0, warm_s: float = 0.0) -> dict:
    """One setup at one context: the repetitions' first-token and whole times, and the figures made of them.
    `base`: the CPU process's resident bytes before the model was loaded (its memory figure is the growth);
    `warm_s`: the warm-up repeats until it has taken this long (once at least)."""
    ids = prompt_ids(context, batch, vocab, seed).to(torch.device(dev.torch_device or dev.id))
    mask = torch.ones_like(ids)
    first: list[float] = []
    whole: list[float] = []
    dev.reset_peak()
    with torch.inference_mode():
        warm_until = time.perf_counter() + warm_s
        while True:  # the warm-up, never counted: its greedy tokens are the setup's
            _generate(model, ids, mask, 1)
            out = _generate(model, ids, mask, new_tokens)
            if time.perf_counter() >= warm_until:
                break
        tokens = [int(t) for t in out[0, context:context + FIRST_TOKENS].tolist()]
        for _ in range(repeats):
            if should_stop is not None and should_stop() and first:
                break
            t1, _ = timed(dev, lambda: _generate(model, ids, mask, 1))
            tn, out = timed(dev, lambda: _generate(model, ids, mask, new_tokens))
            generated = int(out.shape[1]) - context
            if generated != new_tokens:
                raise UserError(f"model.generate made {generated} new tokens where {new_tokens} were asked; its "
                                "generation config stops it early (check the folder's generation_config.json).")
            first.append(t1)
            whole.append(tn)
    reading = dev.memory()
    # the decode is the whole call beyond the first; where some whole call took no longer than its first-token
    # call, the decode is within their noise: not a figure (a clamped tiny time would read as billions of tokens/s)
    decode = [w - f for f, w in zip(first, whole)]
    told = bool(decode) and all(d > 0 for d in decode)
    row = {"context": context, "new_tokens": new_tokens, "batch": batch, "repeats": len(first),
           "first_s": first, "whole_s": whole, "first_tokens": tokens,
           "peak_memory": (max(0, dev.in_use(reading) - base) if dev.kind == "cpu" else
                           reading_peak(reading) or dev.in_use(reading)) or None,
           "memory_measure": dev.memory_measure()}
    row.update(figures(first, decode if told else [], context, new_tokens, batch))
    if not told:
        row["decode_note"] = (f"too short to tell: generating {new_tokens:,} tokens took no longer than the first "
                              "one in some repetitions; ask more --new-tokens")
    return row


def run_tool(config, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """Every device x precision x context of the payload, in this run process; what cannot run is said, not run."""
    from ...models.hf_folder import is_model_folder, read_folder
    from ..toolkit import tool_env

    if not is_model_folder(config.model):
        raise UserError(f"Generation speed is measured for a Hugging Face model folder (config.json and "
                        f"model.safetensors), and {printable(config.model)[:80]!r} is not one; give --model FOLDER.")
    folder = read_folder(config.model)
    contexts, new_tokens = payload["contexts"], payload["new_tokens"]
    frameworks = payload.get("frameworks") or ["torch"]
    bits, notes = setup_options(config.options or {}, frameworks)
    rows, used = [], []
    if folder.max_positions:
        fits = [c for c in contexts if c + new_tokens <= folder.max_positions]
        for c in contexts:
            if c not in fits:
                notes.append(f"context {c:,}: with {new_tokens:,} new tokens it passes the {folder.max_positions:,} "
                             f"positions {folder.architecture} takes; left out")
        contexts = fits
    found = {d.id: d for d in devices.discover_devices()}
    steps = max(1, len(frameworks) * len(payload["devices"]) * len(payload["precisions"]) * max(1, len(contexts)))
    done = 0

    def told(words: str) -> None:
        if progress is not None:
            progress(words, done / steps)

    def counted() -> None:
        nonlocal done
        done += 1

    if "torch" in frameworks:
        for name in payload["devices"]:
            dev = next((d for d in found.values() if d.kind == "cuda"), None) if name == "cuda" else found.get(name)
            if dev is None or not dev.available:
                notes.append(f"{name}: {dev.reason if dev is not None else 'no such device here'}; not measured")
                continue
            probe.require(dev)
            used.append(dev)
            rows += _torch_setups(folder, dev, payload, contexts, config.seed, should_stop, told, counted, notes)
    if "mlx" in frameworks:
        from .mlx_timing import run_setups

        for name in payload["devices"]:
            more, said = run_setups(folder, name, payload, contexts, lambda c: prompt_ids(
                c, 1, folder.vocab_size, config.seed), config.tf32, should_stop, told, counted, bits)
            rows += more
            notes += [n for n in said if n not in notes]
    from .words import sentence

    result = {"tool": "generate", "model": folder.path.name, "architecture": folder.architecture, "rows": rows,
              "notes": notes, "stopped": bool(should_stop and should_stop()),
              "env": tool_env(next((d for d in used if d.kind != "cpu"), used[0]) if used else devices.cpu_device())}
    result["sentence"] = sentence(result)
    return result


TRAINING_ONLY = {"finetune": "--finetune", "lora_rank": "--lora-rank", "lora_alpha": "--lora-alpha",
                 "checkpointing": "--gradient-checkpointing"}


def setup_options(options: dict, frameworks: list[str]) -> tuple[int | None, list[str]]:
    """(the MLX side's bits, notes) from the setup's model options: --quantize quantizes mlx-lm's weights (UserError
    without MLX among the frameworks, or another value); the training settings mean nothing to generation, said (the
    window's setup carries its Training choices)."""
    from ...models.mlx_lm_folder import quantize_of

    bits = quantize_of(options)
    if bits and "mlx" not in frameworks:
        raise UserError(f"--quantize {bits} quantizes the MLX side's weights (mlx-lm's); add mlx to the frameworks "
                        "(--frameworks torch,mlx), or drop --quantize.")
    given = [flag for key, flag in TRAINING_ONLY.items() if options.get(key) not in (None, False, "full")]
    notes = [f"{', '.join(given)} {'are training settings' if len(given) > 1 else 'is a training setting'}, not used "
             "here: generation measures the folder's weights as saved (a fine-tune's own folder is what its save "
             "wrote)"] if given else []
    return bits, notes


def _torch_setups(folder, dev, payload: dict, contexts: list[int], seed: int, should_stop, told, counted,
                  notes: list[str]) -> list[dict]:
    """Every precision x context of `payload` on one PyTorch device (transformers' generate)."""
    from ...models.hf_model import transformers_module

    rows = []
    for prec in payload["precisions"]:
        why = precision.precision_unsupported_reason(dev, prec)
        if why:
            notes.append(f"{dev.id} {prec}: {why}; not measured")
            continue
        transformers_module().AutoModelForCausalLM  # (its code loaded first: the growth is the model's)
        base = dev.in_use(dev.memory()) if dev.kind == "cpu" else 0
        model = load(folder, DTYPES[prec]).to(torch.device(dev.torch_device or dev.id))
        for context in contexts:
            if should_stop is not None and should_stop():
                break
            told(f"{dev.id} {prec}: generating after {context:,} tokens of context")
            try:
                row = measure(model, dev, context, payload["new_tokens"], payload.get("batch") or 1,
                              payload["repeats"], folder.vocab_size, seed, should_stop, base,
                              FIRST_WARMUP_S if context == contexts[0] else 0.0)
            except torch.OutOfMemoryError:
                notes.append(f"{dev.id} {prec}: context {context:,} does not fit in the device's memory")
                break
            rows.append({"device": dev.id, "precision": prec, "framework": "torch", **row})
            counted()
        del model
        if dev.kind == "cuda":
            torch.cuda.empty_cache()
    return rows
