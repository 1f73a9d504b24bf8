"""A model folder's MLX side measured by MPS Studio against a bare mlx-lm loop, alternated in one process (issue
"PyTorch or MLX for your language model"): the engine's reported throughput of an MLX run of the folder (--framework
mlx, LoRA or full) and a bare loop written as mlx-lm's LoRA trainer writes one (`mlx_lm.utils.load`,
`linear_to_lora_layers`, `nn.value_and_grad`, `optimizer.update`, `mx.eval(model.state, optimizer.state, loss)`
every step) on the same folder, text, batch shape, rank and optimizer (a
new batch of the run's rows each step, made into MLX arrays as mlx-lm's iterate_batches makes them, and its
default_loss's masked mean), timed from its first measured step to its last with
a sync. Each round runs both, A B B A, so drift hits both. Like with like: the target figure is the engine's wall
throughput (its whole measured phase, validation apart: summary's wall_samples_per_s in tokens) over the bare loop's
whole span, as every overhead benchmark here (docs/benchmarks.md); the engine's reported median of windows is printed
beside it (a median leaves out the slow windows a busy host makes, so it may read above a whole span). Each ratio is
the median of the rounds with its interval (analysis/repeat.median_interval).

    python benchmarks/mlx_lm_check.py [--rounds 4] [--steps 60] [--finetune lora,full]   (docs/benchmarks.md)

The folder is made here (tests/support/hf_folders: a Llama of random weights, its tokenizer trained on a pattern
text); --layers/--hidden make it larger. Here (Linux, mlx-lm[cpu]) MLX runs on its CPU backend; on a Mac pass
--device mps for its GPU.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_folder(root: Path, layers: int, hidden: int) -> tuple[Path, Path]:
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.support import hf_folders

    text = root / "pattern.txt"
    text.write_text(hf_folders.PATTERN_TEXT * 4)
    folder = root / "llama"
    folder.mkdir()
    hf_folders.tokenizer_for(folder)
    LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=hidden, intermediate_size=2 * hidden,
                                 num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                                 max_position_embeddings=256, bos_token_id=3, eos_token_id=2,
                                 pad_token_id=1)).save_pretrained(folder)
    return folder, text


def bare(folder: Path, text: Path, cfg, finetune: str, steps: int, warmup: int) -> float:
    """mlx-lm's own loop on the run's batch shape: tokens/s from its first measured step to its last."""
    import mlx.core as mx
    import mlx.nn as nn
    import numpy as np
    from mlx_lm.tuner.utils import linear_to_lora_layers
    from mlx_lm.utils import load

    from mpsstudio.engine.data import token_rows
    from mpsstudio.engine.run.mlx.steps import make_optimizer

    model, _ = load(str(folder))
    if finetune == "lora":
        model.freeze()
        linear_to_lora_layers(model, len(model.layers), {"rank": cfg.options.get("lora_rank", 8), "scale": 2.0,
                                                         "dropout": 0.0, "keys": ["self_attn.q_proj",
                                                                                  "self_attn.v_proj"]})
    model.train()
    seq_len = cfg.input_shape[0]
    rows = token_rows.load_text(str(text), folder, 10_000, seq_len).train
    order = np.random.default_rng(0).permutation(len(rows))
    optimizer = make_optimizer(cfg)

    def loss_fn(m, batch, lengths):  # mlx_lm.tuner.trainer.default_loss's arithmetic, on the run's whole rows
        logits = m(batch)[:, :-1]
        targets = batch[:, 1:]
        steps_ = mx.arange(1, targets.shape[1] + 1)
        mask = mx.logical_and(steps_ >= lengths[:, 0:1], steps_ <= lengths[:, 1:])
        ce = nn.losses.cross_entropy(logits, targets) * mask
        return ce.astype(mx.float32).sum() / mask.sum()

    grad = nn.value_and_grad(model, loss_fn)
    start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            mx.synchronize()
            start = time.perf_counter()
        at = (i * cfg.batch_size) % max(1, len(rows) - cfg.batch_size)  # a new batch each step, as iterate_batches
        made = rows.batch(order[at:at + cfg.batch_size])
        ids = mx.array(made["input_ids"].numpy().astype("int32"))
        lengths = mx.array(np.stack([np.ones(cfg.batch_size, "int32"),
                                     made["attention_mask"].sum(1).numpy().astype("int32") - 1], axis=1))
        loss, grads = grad(model, ids, lengths)
        optimizer.update(model, grads)
        mx.eval(model.state, optimizer.state, loss)
    mx.synchronize()
    return steps * cfg.batch_size * seq_len / (time.perf_counter() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--device", default="cpu")
    p.add_argument("--finetune", default="lora,full")
    args = p.parse_args(argv)
    import mlx.core as mx
    import mlx_lm

    from mpsstudio.engine.analysis.repeat import how_said, median_interval
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.run import trainer

    root = Path(tempfile.mkdtemp(prefix="mlx-lm-check-"))
    folder, text = make_folder(root, args.layers, args.hidden)
    print(f"MLX {mx.__version__} ({mx.default_device()}), mlx-lm {mlx_lm.__version__}; a {args.layers}-layer Llama, "
          f"hidden {args.hidden}, batch {args.batch_size} x {args.seq_len} tokens, {args.steps} steps")
    worst = []
    for finetune in args.finetune.split(","):
        cfg = RunConfig(model=str(folder), dataset=str(text), device=args.device, steps=args.steps, epochs=None,
                        warmup_steps=args.warmup, batch_size=args.batch_size, input_shape=(args.seq_len,),
                        optimizer="adamw", lr=1e-4, framework="mlx", options={"finetune": finetune})
        ratios = []
        for r in range(1, args.rounds + 1):
            order = ("engine", "bare") if r % 2 else ("bare", "engine")
            got = {}
            for what in order:
                if what == "engine":
                    result = trainer.run(cfg)
                    if result.status != "finished":
                        raise SystemExit(f"the MLX run {result.status}: {result.error}")
                    s = result.summary
                    got[what] = s.tokens_per_s
                    got["wall"] = s.wall_samples_per_s * s.tokens_per_sample
                    got["wait"] = s.data_wait_fraction or 0.0
                else:
                    got[what] = bare(folder, text, cfg, finetune, args.steps, args.warmup)
            ratios.append((got["wall"] / got["bare"], got["engine"] / got["bare"]))
            print(f"{finetune} round {r}: engine wall {got['wall']:,.0f} tokens/s (median window {got['engine']:,.0f}),"
                  f" data wait {got['wait']:.1%}; bare mlx-lm loop {got['bare']:,.0f}: wall/bare {ratios[-1][0]:.3f}, median/bare {ratios[-1][1]:.3f}")
        wall, lo, hi = median_interval([w for w, _ in ratios])
        med, mlo, mhi = median_interval([m for _, m in ratios])
        worst.append(abs(wall - 1))
        print(f"{finetune}: wall/bare {wall:.3f} [{lo:.3f}-{hi:.3f}], median/bare {med:.3f} [{mlo:.3f}-{mhi:.3f}] "
              f"({how_said(len(ratios))}; target: wall/bare within 3 %)")
    print(f"largest |wall/bare - 1|: {max(worst):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
