"""What a script's run found about the script, in sentences every front end shows the same way: where its batch
came from, its tokens a second (a token model), the settings read from it, the device it trained on when that was
not the one asked. No torch here."""

from __future__ import annotations

from ...basics.formatting import fmt_rate, is_finite, one_line, printable
from ...basics.results import RunResult


def script_lines(r: RunResult) -> list[str]:
    """The sentences of a script's run ([] for a run of MPS Studio's own loop)."""
    if not r.config.is_script:
        return []
    s, out = r.summary, []
    source = s.batch_from
    if isinstance(source, str) and source and r.config.batch_size:
        out.append(f"Batch: {r.config.batch_size:,} samples a step, from {printable(one_line(source, 200))}.")
    sizes = s.batch_sizes
    if isinstance(sizes, list) and len(sizes) > 1:
        out.append(f"The batch varied between steps: {', '.join(f'{v:,}' for v in sizes[:8] if isinstance(v, int))}"
                   f"{', ...' if len(sizes) > 8 else ''} samples.")
    per, rate, tokens = s.tokens_per_sample, s.samples_per_s, s.tokens_per_s
    if is_finite(per) and per > 0 and is_finite(rate) and is_finite(tokens):
        out.append(f"Tokens: {fmt_rate(tokens)} tokens/s, measured ({per:,.4g} tokens a sequence x "
                   f"{fmt_rate(rate)} sequences/s; a sample is one sequence).")
    words = s.script_settings_words
    if isinstance(words, list) and words:
        shown = ", ".join(printable(one_line(str(w), 80)) for w in words[:12])
        out.append(f"The script's settings, read from PyTorch at its first measured step: {shown}.")
    elif r.status == "finished":
        out.append("The script's settings were not seen (no measured step reached its model).")
    return out
