"""Generation speed said: the sentence (per context, which setup decodes fastest, only where the intervals say so),
the table and its legend, the command's arguments and the window's sheet. No torch here."""

from __future__ import annotations

from ...analysis.repeat import order_rank
from ...basics.config import DEVICE_PATTERN, PRECISIONS
from ...basics.errors import UserError
from ...basics.formatting import Table, fmt_bytes, printable

CONTEXTS = (128, 512)  # prompt lengths by default (those past the folder's positions are left out, said)
NEW_TOKENS = 64
REPEATS = 7  # repetitions of each setup (their range bounds the median at 98 %; 9 or more: its 95 % interval)
MAX_CONTEXT, MAX_NEW, MAX_REPEATS = 1 << 20, 1 << 16, 1000
MEMORY_WORDS = {
    "rss_growth": "growth of the process's resident memory since before the model was loaded (CPU)",
    "peak_allocated": "peak allocated by PyTorch: weights, cache and activations",
    "in_use_at_window_ends": "in use after the last generation, not a peak (this torch keeps no MPS peak)",
    "mlx_peak": "peak of MLX's allocator (mx.get_peak_memory): weights, cache and activations",
}
FRAMEWORKS = ("torch", "mlx")
QUANTIZED_METHOD = ("4-bit, 8-bit: mlx-lm's weights quantized as its convert -q makes them (nn.quantize, affine, "
                    "groups of 64, the scales in the precision), not PyTorch's arithmetic: their tokens can part by more "
                    "than rounding. ")
MLX_METHOD = ("MLX: mlx-lm's generate_step, the same prompt ids and lengths, its greedy sampler and cache, the "
              "prompt in its chunks of 2,048; each call timed to the yield of its last wanted token (mlx-lm computes "
              "one token ahead: that step finishes off the clock). ")


def subject(result: dict) -> str:
    """"gpt2 on cpu and mps": the model folder and the devices measured."""
    devices = list(dict.fromkeys(label(r).rsplit(" ", 1)[0] for r in result.get("rows") or []))
    return f"{printable(result.get('model') or '?')} on {' and '.join(devices) or 'no device'}"


def label(row: dict) -> str:
    """"cpu fp32" (PyTorch's), "MLX \u00b7 cpu fp32" (mlx-lm's), "MLX \u00b7 cpu fp32 4-bit" (its weights quantized)."""
    prefix = "MLX \u00b7 " if row.get("framework") == "mlx" else ""
    bits = f" {row['quantize']}-bit" if row.get("quantize") else ""
    return f"{prefix}{row['device']} {row['precision']}{bits}"


def reference(rows: list[dict]) -> dict | None:
    """The row a context's greedy tokens are compared with: PyTorch's cpu fp32, else the context's first."""
    return next((r for r in rows if r.get("framework", "torch") == "torch" and r["device"] == "cpu"
                 and r["precision"] == "fp32"), rows[0] if rows else None)


def figure(row: dict, key: str) -> tuple[float, float, float] | None:
    """A row's (median, low, high) of `key`, None where it has none (or not three numbers: an imported file's)."""
    value = row.get(key)
    return (value[0], value[1], value[2]) if isinstance(value, list) and len(value) == 3 else None


def interval(fig, unit: str = "", digits: int = 0) -> str:
    if not fig:
        return "-"
    median, low, high = fig
    return f"{median:,.{digits}f}{unit} [{low:,.{digits}f}-{high:,.{digits}f}]"


def how_said(n: int) -> str:
    return (f"range over {n} repetitions" if order_rank(n) == 1 else
            f"95 % interval of the median of {n} repetitions")


def fastest(rows: list[dict], key: str) -> str:
    """Which setup is fastest at `key` (a higher figure), by the ± rule: its interval above every other's, or the
    ones whose intervals reach it, tied."""
    measured = [(r, f) for r in rows if (f := figure(r, key)) is not None]
    if len(measured) < 2:
        return ""
    best, top = max(measured, key=lambda m: m[1][0])
    tied = [r for r, f in measured if r is not best and f[2] >= top[1]]
    if tied:
        return f"{' and '.join(label(r) for r in [best, *tied])} are apart by less than the noise"
    second, next_fig = max(((r, f) for r, f in measured if r is not best), key=lambda m: m[1][0])
    return f"{label(best)} is fastest, {top[0] / next_fig[0]:.2f}x {label(second)}"


def sentence(result: dict) -> str:
    rows = result.get("rows") or []
    if not rows:
        why = "; ".join(result.get("notes") or []) or "nothing was measured"
        return f"Generation speed of {printable(result.get('model', 'the model'))} was not measured: {why}."
    parts = []
    for context in dict.fromkeys(r["context"] for r in rows):
        here = [r for r in rows if r["context"] == context]
        r0 = here[0]
        said = "; ".join((f"{label(r)} decodes {interval(figure(r, 'decode_tps'))} tokens/s" if figure(
            r, "decode_tps") else f"{label(r)}'s decode is {r.get('decode_note') or 'not measured'}")
            + f", first token in {interval(figure(r, 'ttft_ms'), ' ms', 1)}" for r in here)
        verdict = fastest(here, "decode_tps")
        parts.append(f"After {context:,} tokens of context ({r0['new_tokens']:,} new, decode at contexts "
                     f"{context + 1:,}-{context + r0['new_tokens'] - 1:,}): {said}" + (f"; decoding, {verdict}"
                                                                                   if verdict else "")
                     + frameworks_agree(here))
    n = min(r["repeats"] for r in rows)
    noted = [str(note).rstrip(".") for note in result.get("notes") or [] if isinstance(note, str) and note.strip()]
    return (f"Generation of {printable(result.get('model', ''))}, greedy with its cache, batch {rows[0]['batch']}, "
            f"measured ({how_said(n)}, in brackets). " + ". ".join(parts) + "."
            + "".join(f" {printable(note[:1].upper() + note[1:])}." for note in noted))


def table(result: dict) -> Table:
    headers = ["Setup", "Context", "New", "First token (ms)", "Prefill tokens/s", "Decode tokens/s", "Memory",
               "Same tokens"]
    rows = result.get("rows") or []
    chosen = {c: reference([r for r in rows if r["context"] == c]) for c in dict.fromkeys(r["context"] for r in rows)}
    cells = []
    for r in rows:
        ref = chosen.get(r["context"])
        tokens = r.get("first_tokens") or []
        same = ("-" if ref is None or not ref.get("first_tokens") or not tokens else "(reference)" if r is ref
                else _agree(ref["first_tokens"], tokens))
        cells.append([label(r), f"{r['context']:,}", f"{r['new_tokens']:,}", interval(figure(r, "ttft_ms"), digits=1),
                      interval(figure(r, "prefill_tps")), interval(figure(r, "decode_tps")),
                      fmt_bytes(r.get("peak_memory")), same])
    return Table(headers, cells, [False, True, True, True, True, True, True, False])


def _agree(reference: list[int], tokens: list[int]) -> str:
    for i, (a, b) in enumerate(zip(reference, tokens)):
        if a != b:
            return f"differ from token {i + 1}"
    return f"the same {min(len(reference), len(tokens))}"


def frameworks_agree(here: list[dict]) -> str:
    """"; MLX \u00b7 cpu fp32 generates the same 16 greedy tokens as cpu fp32" where a context's rows are of two
    frameworks: whether they compute the same thing, said with their speed."""
    ref = reference(here)
    if ref is None or len({r.get("framework", "torch") for r in here}) < 2 or not ref.get("first_tokens"):
        return ""
    said = []
    for r in here:
        if r.get("framework", "torch") != ref.get("framework", "torch") and r.get("first_tokens"):
            agree = _agree(ref["first_tokens"], r["first_tokens"])
            said.append((f"{label(r)} generates the {agree[len('the '):]} greedy tokens as {label(ref)}"
                         if agree.startswith("the same") else f"{label(r)}'s greedy tokens {agree} of {label(ref)}'s")
                        + (f" ({r['quantize']}-bit weights: not the same arithmetic)" if r.get("quantize") else ""))
    return "; " + "; ".join(said) if said else ""


def legend(result: dict) -> str:
    rows = result.get("rows") or []
    measures = "; ".join(f"{MEMORY_WORDS.get(m, m)}" for m in dict.fromkeys(r.get("memory_measure") or "-"
                                                                             for r in rows))
    n = min((r["repeats"] for r in rows), default=0)
    if sum(1 for r in rows if r.get("memory_measure") == "rss_growth") > len({r["context"] for r in rows}):
        measures += (" (on the CPU a later setup reuses memory the process took for an earlier one: only the first "
                     "setup's growth is all its own)")
    return ("Measured: the median of each setup's repetitions with its " + how_said(n) + ", a warm-up apart, the device "
            "synchronized at every clock read. First token: generate(max_new_tokens=1), the prompt's forward pass and "
            "the first token; prefill tokens/s is the prompt's tokens over it. Decode tokens/s: the other new tokens "
            "over what generate(max_new_tokens=New) took beyond it, at the contexts after the prompt. Random prompt "
            "ids (seeded), greedy, key/value cache on. "
            + (MLX_METHOD if any(r.get("framework") == "mlx" for r in rows) else "")
            + (QUANTIZED_METHOD if any(r.get("quantize") for r in rows) else "")
            + "Memory: " + (measures or "-") + ". Same tokens: the greedy tokens against cpu fp32's (PyTorch's; random "
            "weights differ by rounding alone).")


def section(result: dict):
    return ([table(result).with_legend(legend(result))] if result.get("rows") else []), None


def rederived(result: dict) -> dict:
    result["sentence"] = sentence(result)
    return result


def failed(result: dict) -> bool:
    return not result.get("rows")


def _numbers(text, what: str, top: int) -> list[int]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts or not all(p.isdigit() and 1 <= int(p) <= top for p in parts):
        raise UserError(f"{what} must be whole numbers from 1 to {top:,}, comma-separated, not "
                        f"{printable(str(text))[:40]!r}.")
    return list(dict.fromkeys(int(p) for p in parts))


def arguments(values: dict) -> dict:
    """--devices, --contexts, --new-tokens, --repeats, --precisions and --batch-size as the payload; UserError for a
    value outside."""
    text = values.get("devices")
    names = list(dict.fromkeys(d.strip().lower() for d in text.split(",") if d.strip())) if text else []
    for name in names:
        if not DEVICE_PATTERN.fullmatch(name):
            raise UserError(f"--devices: {printable(name)[:40]!r} is not a device; name cpu, mps, cuda or cuda:N, "
                            "comma-separated.")
    if not names:
        from ...machine.devices import discover_devices

        names = [d.id for d in discover_devices() if d.available]
    contexts = _numbers(values.get("contexts") or ",".join(map(str, CONTEXTS)), "--contexts", MAX_CONTEXT)
    new = NEW_TOKENS if values.get("new_tokens") is None else values["new_tokens"]
    repeats = REPEATS if values.get("repeats") is None else values["repeats"]
    batch = 1 if values.get("batch_size") is None else values["batch_size"]
    if not 1 <= batch <= MAX_NEW:
        raise UserError(f"--batch-size must be from 1 to {MAX_NEW:,} sequences, not {batch}.")
    if not 2 <= new <= MAX_NEW:
        raise UserError(f"--new-tokens must be from 2 (the first token and one decoded) to {MAX_NEW:,}, not {new}.")
    if not 1 <= repeats <= MAX_REPEATS:
        raise UserError(f"--repeats must be from 1 to {MAX_REPEATS:,}, not {repeats}.")
    precisions = [p.strip().lower() for p in str(values.get("precisions") or "fp32").split(",") if p.strip()]
    for p in precisions:
        if p not in PRECISIONS:
            raise UserError(f"--precisions: {printable(p)[:20]!r} is not one; choose from {', '.join(PRECISIONS)}.")
    frameworks = [f.strip().lower() for f in str(values.get("frameworks") or "torch").split(",") if f.strip()]
    for f in frameworks:
        if f not in FRAMEWORKS:
            raise UserError(f"--frameworks: {printable(f)[:20]!r} is not one; choose torch, mlx or torch,mlx.")
    if "mlx" in frameworks:
        _mlx_lm_here()
    return {"devices": names, "contexts": contexts, "new_tokens": new, "repeats": repeats,
            "precisions": list(dict.fromkeys(precisions)), "batch": batch,
            "frameworks": list(dict.fromkeys(frameworks)) or ["torch"]}


def _mlx_lm_here() -> None:
    """UserError before anything runs where mlx-lm is not installed here (found without importing MLX: a front end
    asks; whether MLX computes on the device is the run process's to say)."""
    import importlib.util

    if importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_lm") is None:
        raise UserError("--frameworks mlx needs MLX and mlx-lm; install them with pip install 'mpsstudio[mlx]' (on "
                        "Linux 'mlx-lm[cpu]'), or generate with PyTorch alone (--frameworks torch).")


def chosen(values: dict, context) -> dict:
    """The window's sheet as the tool's payload (the setup's model; the devices checked)."""
    payload = arguments({"devices": ",".join(context.devices), "contexts": values["contexts"],
                         "new_tokens": values["new_tokens"], "repeats": values["repeats"],
                         "precisions": ",".join(values["precisions"] or ("fp32",)), "batch_size": values["batch_size"],
                         "frameworks": ",".join(values.get("frameworks") or ("torch",))})
    return {"config": context.config, "batch_sizes": None, "payload": payload}


def plan(picked: dict, _context) -> str:
    p = picked["payload"]
    contexts = ", ".join(f"{c:,}" for c in p["contexts"])
    both = " with PyTorch and with MLX (mlx-lm)" if len(p.get("frameworks") or ()) > 1 else (
        " with MLX (mlx-lm)" if p.get("frameworks") == ["mlx"] else "")
    return (f"Generates {p['new_tokens']:,} tokens after {contexts} tokens of context on {', '.join(p['devices'])} "
            f"in {', '.join(p['precisions'])}{both}, {p['repeats']} times each after a warm-up: the time to the first "
            "token, prefill and decode tokens/s.")
