"""Are `mpsstudio generate`'s figures a bare `model.generate` loop's? Side by side in one process, alternated.

A GPT-2-small-sized folder (GPT2Config's defaults: 124M parameters, 1,024 positions, random weights, written here
with save_pretrained) is measured three ways at each precision and context length, one after another in every
round (at batch 1 decode is bound by the host's kernel launches, and a lent host's speed drifts by 20 % and more
between minutes: only figures taken side by side compare):
- the engine: tools/generate/timing.measure, the function `mpsstudio generate` runs in its run process, on the model
  timing.load made (its warm-up, its synchronized clock reads, its medians);
- a bare loop timed the same way, written here: the model loaded with from_pretrained(dtype), random ids, after a
  warm-up, generate(max_new_tokens=1) and generate(max_new_tokens=N) each timed from torch.cuda.synchronize() to
  torch.cuda.synchronize(); the first token is the first call's time, decode the whole call's beyond it;
- a bare loop timed by a streamer (on CUDA transformers hands each token to the host as it is made): the first token
  at the stream's second put (the first is the prompt), decode the tokens after it over the time to the last put.
None of the engine's timing code is in the two bare loops. It prints each round's figures, then per figure the
median of the rounds' engine/bare ratios with that median's interval (the range under 9 rounds, else its 95 %
interval: analysis/repeat.median_interval). The target: within 3 %.

    python benchmarks/generate_check.py [--device cuda] [--contexts 128,896] [--new-tokens 32]
        [--precisions fp32,bf16] [--repeats 3] [--rounds 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_folder(where: Path) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config()).save_pretrained(str(where))
    return where


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def generate(model, ids, new: int, streamer=None):
    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                          min_new_tokens=new, do_sample=False, num_beams=1, use_cache=True, pad_token_id=0,
                          temperature=None, top_p=None, top_k=None, streamer=streamer)


class Stamps:
    """A streamer that notes the time of each put (the prompt, then each new token as the host receives it)."""

    def __init__(self):
        self.times: list[float] = []

    def put(self, _value):
        self.times.append(time.perf_counter())

    def end(self):
        pass


def load_bare(folder: Path, device: torch.device, precision: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                dtype=DTYPES[precision]).to(device).eval()


def bare(model, device: torch.device, context: int, new: int, repeats: int) -> dict:
    ids = torch.randint(0, model.config.vocab_size, (1, context), generator=torch.Generator().manual_seed(0)).to(device)
    first, decode, s_first, s_decode = [], [], [], []
    with torch.inference_mode():
        for i in range(repeats + 1):
            sync(device)
            t0 = time.perf_counter()
            generate(model, ids, 1)
            sync(device)
            t1 = time.perf_counter()
            generate(model, ids, new)
            sync(device)
            t2 = time.perf_counter()
            stamps = Stamps()
            sync(device)
            t3 = time.perf_counter()
            generate(model, ids, new, stamps)
            sync(device)
            if i == 0:
                continue
            first.append(t1 - t0)
            decode.append((new - 1) / max(1e-9, (t2 - t1) - (t1 - t0)))
            s_first.append(stamps.times[1] - t3)
            s_decode.append((new - 1) / (stamps.times[-1] - stamps.times[1]))
    med = statistics.median
    return {"ttft_ms": 1000 * med(first), "decode_tps": med(decode), "stream_ttft_ms": 1000 * med(s_first),
            "stream_decode_tps": med(s_decode)}


def main() -> int:
    from mpsstudio.engine.analysis.repeat import median_interval
    from mpsstudio.engine.machine import devices
    from mpsstudio.engine.models.hf_folder import read_folder
    from mpsstudio.engine.tools.generate import timing

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--contexts", default="128,896")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    precisions = args.precisions.split(",")
    dev = devices.resolve_device(args.device)
    tdev = torch.device(dev.torch_device or dev.id)
    with tempfile.TemporaryDirectory() as tmp:
        folder = read_folder(str(make_folder(Path(tmp) / "gpt2-small")))
        models = {p: (timing.load(folder, timing.DTYPES[p]).to(tdev), load_bare(folder.path, tdev, p))
                  for p in precisions}
        ratios: dict = {}
        for round_ in range(1, args.rounds + 1):
            for precision in precisions:
                ours_model, bare_model = models[precision]
                for context in contexts:
                    row = timing.measure(ours_model, dev, context, args.new_tokens, 1, args.repeats,
                                         folder.vocab_size)
                    ours = {"ttft_ms": row["ttft_ms"][0], "decode_tps": row["decode_tps"][0]}
                    theirs = bare(bare_model, tdev, context, args.new_tokens, args.repeats)
                    ratios.setdefault((precision, context), []).append(
                        (ours["ttft_ms"] / theirs["ttft_ms"], ours["decode_tps"] / theirs["decode_tps"],
                         ours["ttft_ms"] / theirs["stream_ttft_ms"], ours["decode_tps"] / theirs["stream_decode_tps"]))
                    print(f"round {round_} {precision} context {context}: engine first token {ours['ttft_ms']:.2f} ms,"
                          f" decode {ours['decode_tps']:,.1f} tokens/s; bare {theirs['ttft_ms']:.2f} ms, "
                          f"{theirs['decode_tps']:,.1f} tokens/s; streamer {theirs['stream_ttft_ms']:.2f} ms, "
                          f"{theirs['stream_decode_tps']:,.1f} tokens/s", flush=True)
        print(f"\nengine / bare over {args.rounds} rounds: the median ratio [its interval] (first token: lower is "
              "faster; decode: higher)")
        print("precision  context  first-token/bare      decode/bare           first-token/streamer  decode/streamer")
        for (precision, context), line in ratios.items():
            cells = []
            for i in range(4):
                m, lo, hi = median_interval([r[i] for r in line])
                cells.append(f"{m:.3f} [{lo:.3f}-{hi:.3f}]")
            print(f"{precision:9}  {context:7}  " + "  ".join(f"{c:20}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
