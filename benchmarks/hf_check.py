"""A Hugging Face model folder measured by MPS Studio against a bare transformers loop, alternated in one process
(issue "Your Hugging Face model"): a GPT-2-small-sized causal LM (GPT2Config's defaults: 12 layers, 768 wide, 50,257
tokens; random weights, saved with save_pretrained into a temporary folder), fine-tuned at sequence length 512 in bf16
autocast with AdamW, in full and with LoRA (rank 8 on c_attn). The bare loop loads the same folder with transformers
(and peft), takes AdamW over its trainable parameters and a pool of four batches on the GPU, and is timed from its
first measured step to its last with a synchronize. Then the largest batch: the engine's max-batch against a bisection
of the bare loop (a batch fits when one full step of it runs). Memory: each run's peak.

    python benchmarks/hf_check.py [--device cuda] [--rounds 2] [--steps 30] [--batch 8] [--max-batch]

(docs/benchmarks.md, "Your Hugging Face model"). On the lent machine transformers, peft, safetensors, tokenizers and
accelerate come from carried wheels (benchmarks/lent_machine.sh installs .wheels/ and .wheels/hf/).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SEQ = 512


def make_folder(root: Path, tiny: bool = False) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    folder = root / "gpt2-small-random"
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000) if tiny else GPT2Config()
    GPT2LMHeadModel(config).save_pretrained(str(folder))
    return folder


def _cuda(device: str) -> bool:
    return device.startswith("cuda")


def sync(device: str) -> None:
    import torch

    if _cuda(device):
        torch.cuda.synchronize()


def bare_model(folder: Path, finetune: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
    if finetune == "lora":
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"],
                                                           task_type="CAUSAL_LM"))
    return model.to(device).train()


def bare_step(model, optimizer, batch, device: str):
    import torch

    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    return loss


def bare(folder: Path, finetune: str, device: str, batch: int, steps: int, warmup: int) -> tuple[float, int]:
    """(samples/s, peak bytes) of the bare loop."""
    import torch

    model = bare_model(folder, finetune, device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        ids = torch.randint(0, model.config.vocab_size, (batch, SEQ), generator=generator).to(device)
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids})
    if _cuda(device):
        torch.cuda.reset_peak_memory_stats()
    start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            sync(device)
            start = time.perf_counter()
        bare_step(model, optimizer, batches[i % 4], device)
    sync(device)
    rate = steps * batch / (time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if _cuda(device) else 0
    del model, optimizer, batches
    if _cuda(device):
        torch.cuda.empty_cache()
    return rate, peak


def fits(folder: Path, finetune: str, device: str, batch: int) -> bool:
    """One full bare step of `batch` runs without running out of memory."""
    import torch

    model = bare_model(folder, finetune, device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (batch, SEQ), device=device)
    try:
        bare_step(model, optimizer, {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}, device)
        bare_step(model, optimizer, {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}, device)
        sync(device)
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        del model, optimizer, ids
        if _cuda(device):
            torch.cuda.empty_cache()


def bisect(folder: Path, finetune: str, device: str, start: int) -> int:
    low, high = 0, start
    while fits(folder, finetune, device, high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(folder, finetune, device, mid) else (low, mid)
    return low


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--max-batch", action="store_true", help="also the largest batch, engine against a bisection")
    p.add_argument("--finetunes", default="full,lora", help="which to compare (full, lora or both)")
    p.add_argument("--tiny", action="store_true", help="a 2-layer GPT instead (a check of this script on a CPU)")
    args = p.parse_args(argv)
    import torch
    import transformers

    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.run import trainer

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name(0) if _cuda(args.device) else args.device}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(Path(tmp), args.tiny)
        peaks = {}
        for finetune in args.finetunes.split(","):
            config = RunConfig(model=str(folder), dataset="synthetic", device=args.device, precision="bf16",
                               optimizer="adamw", lr=1e-4, batch_size=args.batch, input_shape=[SEQ], steps=args.steps,
                               warmup_steps=args.warmup, epochs=None, options={"finetune": finetune})
            ratios = []
            for r in range(1, args.rounds + 1):
                got = {}
                for what in (("engine", "bare") if r % 2 else ("bare", "engine")):
                    if what == "engine":
                        result = trainer.run(config)
                        if result.status != "finished":
                            raise SystemExit(f"the engine's run {result.status}: {result.error}")
                        s = result.summary
                        got[what] = s["samples_per_s"]
                        peaks[(finetune, "engine")] = s.get("peak_memory")
                        trained = s.get("trainable_parameters"), s.get("parameters")
                        tokens = s.get("tokens_per_s")
                    else:
                        got[what], peaks[(finetune, "bare")] = bare(folder, finetune, args.device, args.batch,
                                                                    args.steps, args.warmup)
                ratios.append(got["engine"] / got["bare"])
                print(f"{finetune} round {r}: engine {got['engine']:,.1f} samples/s ({tokens:,.0f} tokens/s), bare "
                      f"transformers loop {got['bare']:,.1f}, ratio {ratios[-1]:.3f}", flush=True)
            print(f"{finetune}: engine/bare median {statistics.median(ratios):.3f} [range {min(ratios):.3f}-"
                  f"{max(ratios):.3f}]; trainable {trained[0]:,} of {trained[1]:,} parameters; peak memory engine "
                  f"{(peaks[(finetune, 'engine')] or 0) / 2**30:.2f} GiB, bare {peaks[(finetune, 'bare')] / 2**30:.2f} GiB",
                  flush=True)
        if ("lora", "engine") in peaks and ("full", "engine") in peaks:
            saving = 1 - (peaks[("lora", "engine")] or 0) / (peaks[("full", "engine")] or 1)
            print(f"LoRA's memory saving (engine's peaks, batch {args.batch}, seq {SEQ}): {saving:.1%}", flush=True)
        if args.max_batch:
            from mpsstudio.engine.tools import maxbatch

            for finetune in ("full", "lora"):
                config = RunConfig(model=str(folder), dataset="synthetic", device=args.device, precision="bf16",
                                   optimizer="adamw", lr=1e-4, batch_size=args.batch, input_shape=[SEQ], steps=2,
                                   warmup_steps=1, epochs=None, options={"finetune": finetune})
                t = time.perf_counter()
                found = maxbatch.search(config, start=args.batch)
                engine_s = time.perf_counter() - t
                t = time.perf_counter()
                truth = bisect(folder, finetune, args.device, args.batch)
                print(f"{finetune}: max-batch {found.get('largest_batch')} ({engine_s:.0f} s), bisection of the bare loop "
                      f"{truth} ({time.perf_counter() - t:.0f} s): ratio {(found.get('largest_batch') or 0) / truth:.3f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
