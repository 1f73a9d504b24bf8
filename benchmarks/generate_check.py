"""Are `mpsstudio generate`'s figures a bare `model.generate` loop's? Side by side in one call, alternated in rounds.

A GPT-2-small-sized folder (GPT2Config's defaults: 124M parameters, 1,024 positions, random weights, written here
with save_pretrained) is measured three ways at each precision and context length:
- the engine: `mpsstudio generate`'s tool (tools/generate/timing.py) in a run process of its own, as the front ends
  run it;
- a bare loop timed the same way, in this process: the model loaded with from_pretrained(dtype), random ids, after
  a warm-up generate(max_new_tokens=1) and generate(max_new_tokens=N) each timed from torch.cuda.synchronize() to
  torch.cuda.synchronize(); the time to the first token is the first call's, decode the whole call's beyond it;
- a bare loop timed by a streamer (CUDA streams each token as it is made: transformers' StopCheck copies it to the
  host at every step): the time to the first token is the stream's second put (the first is the prompt), decode the
  tokens after it over the time from it to the last put. None of the engine's timing code.
It prints each figure's median over the repetitions, the engine's ratio to each bare loop per round, and the
median ratio over the rounds (the target: within 3 %).

    python benchmarks/generate_check.py [--device cuda] [--contexts 128,512,896] [--new-tokens 64]
        [--precisions fp32,bf16] [--repeats 9] [--rounds 3]
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


def bare(folder: Path, device: torch.device, precision: str, context: int, new: int, repeats: int) -> dict:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                 dtype=DTYPES[precision]).to(device).eval()
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
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    med = statistics.median
    return {"ttft_ms": 1000 * med(first), "decode_tps": med(decode), "stream_ttft_ms": 1000 * med(s_first),
            "stream_decode_tps": med(s_decode)}


def engine(folder: Path, device: str, precisions: list[str], contexts: list[int], new: int, repeats: int) -> dict:
    from mpsstudio.engine import process
    from mpsstudio.engine.basics.config import RunConfig

    config = RunConfig(model=str(folder), dataset="synthetic", device=device)
    result = process.run_tool("generate", {"config": config.to_dict(), "devices": [device], "contexts": contexts,
                                           "new_tokens": new, "repeats": repeats, "precisions": precisions,
                                           "batch": 1}, timeout_s=1800)
    return {(r["precision"], r["context"]): {"ttft_ms": r["ttft_ms"][0], "decode_tps": r["decode_tps"][0],
                                             "prefill_tps": r["prefill_tps"][0]} for r in result["rows"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--contexts", default="128,512,896")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    precisions = args.precisions.split(",")
    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(Path(tmp) / "gpt2-small")
        ratios: dict = {}
        for round_ in range(1, args.rounds + 1):
            mine = engine(folder, args.device, precisions, contexts, args.new_tokens, args.repeats)
            for precision in precisions:
                for context in contexts:
                    theirs = bare(folder, device, precision, context, args.new_tokens, args.repeats)
                    ours = mine[(precision, context)]
                    line = ratios.setdefault((precision, context), [])
                    line.append((ours["ttft_ms"] / theirs["ttft_ms"], ours["decode_tps"] / theirs["decode_tps"],
                                 ours["ttft_ms"] / theirs["stream_ttft_ms"],
                                 ours["decode_tps"] / theirs["stream_decode_tps"]))
                    print(f"round {round_} {precision} context {context}: engine first token {ours['ttft_ms']:.2f} ms,"
                          f" decode {ours['decode_tps']:,.1f} tokens/s, prefill {ours['prefill_tps']:,.0f} tokens/s;"
                          f" bare {theirs['ttft_ms']:.2f} ms, {theirs['decode_tps']:,.1f} tokens/s; streamer "
                          f"{theirs['stream_ttft_ms']:.2f} ms, {theirs['stream_decode_tps']:,.1f} tokens/s", flush=True)
        print("\nengine / bare, the median over the rounds (first token: lower is faster; decode: higher)")
        print("precision  context  first-token/bare  decode/bare  first-token/streamer  decode/streamer")
        for (precision, context), line in ratios.items():
            cols = [statistics.median(r[i] for r in line) for i in range(4)]
            print(f"{precision:9}  {context:7}  {cols[0]:16.3f}  {cols[1]:11.3f}  {cols[2]:20.3f}  {cols[3]:15.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
