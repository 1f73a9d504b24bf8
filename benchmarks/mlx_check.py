"""MLX measured by MPS Studio against a bare MLX loop, alternated in one process (issue "PyTorch or MLX?"): the
engine's reported throughput of an MLX run (--framework mlx) and a bare loop of the same twin, weights and batch
shape that evaluates every step as MLX's examples do (`mx.eval(loss, model.state, optimizer.state)`), timed from its
first measured step to its last with a sync; then PyTorch's run of the same setup and the PyTorch-vs-MLX sentence
with its interval (contrast.by_framework).

    python benchmarks/mlx_check.py [--rounds 3] [--steps 20]          (docs/benchmarks.md, "PyTorch or MLX?")

Here (Linux, mlx[cpu]) MLX runs on its CPU backend; on a Mac the same script measures its GPU with --device mps.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CASES = {  # model: (the run's settings): small enough for MLX's CPU backend on 2 cores
    "resnet18": dict(image_size=32, batch_size=16),
    "transformer": dict(input_shape=[64], batch_size=16),
}


def bare(model: str, cfg, steps: int, warmup: int) -> float:
    """A bare MLX loop: the twin with PyTorch's initial weights, one batch of the run's shape, eval every step."""
    import mlx.core as mx
    import mlx.nn as nn
    import torch

    from mpsstudio.engine.models import mlx_twins, registry
    from mpsstudio.engine.models.user import user_function
    from mpsstudio.engine.run.mlx.steps import make_optimizer
    from mpsstudio.engine.run.setup import synthetic_input

    spec = registry.input_spec_for(model, synthetic_input(cfg))
    torch.manual_seed(cfg.seed)
    twin = mlx_twins.build_twin(model, spec, user_function)
    mlx_twins.transfer(registry.build_model(model, spec), twin)
    twin.train()
    optimizer = make_optimizer(cfg)
    if spec.kind == "image":
        shape = (cfg.batch_size, *spec.sample_shape)
        x = mx.random.normal(shape if mlx_twins.layout_of(twin) == "nchw" else (shape[0], *shape[2:], shape[1]))
    else:
        x = mx.random.randint(0, spec.vocab_size, (cfg.batch_size, *spec.sample_shape)).astype(mx.int32)
    y = mx.random.randint(0, spec.num_classes, (cfg.batch_size,)).astype(mx.int32)

    def loss_fn(m, a, b):
        return nn.losses.cross_entropy(m(a).astype(mx.float32), b, reduction="mean")

    grad = nn.value_and_grad(twin, loss_fn)
    start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            mx.synchronize()
            start = time.perf_counter()
        loss, grads = grad(twin, x, y)
        optimizer.update(twin, grads)
        mx.eval(loss, twin.state, optimizer.state)
    mx.synchronize()
    return steps * cfg.batch_size / (time.perf_counter() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", default=",".join(CASES))
    args = p.parse_args(argv)
    import mlx.core as mx
    import torch

    from mpsstudio.engine.analysis.contrast import by_framework, verdict
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.run import trainer

    print(f"MLX {mx.__version__} ({mx.default_device()}), torch {torch.__version__}, threads {torch.get_num_threads()}")
    worst = []
    for model in args.models.split(","):
        base = RunConfig(model=model, dataset="synthetic", device=args.device, steps=args.steps, epochs=None,
                         warmup_steps=args.warmup, **CASES[model])
        mlx_cfg = base.changed(framework="mlx")
        ratios, runs = [], []
        for r in range(1, args.rounds + 1):
            order = ("engine", "bare") if r % 2 else ("bare", "engine")  # A B B A: drift hits both
            got = {}
            for what in order:
                if what == "engine":
                    result = trainer.run(mlx_cfg)
                    if result.status != "finished":
                        raise SystemExit(f"the MLX run {result.status}: {result.error}")
                    got[what] = result.summary["samples_per_s"]
                    runs.append(result)
                else:
                    got[what] = bare(model, mlx_cfg, args.steps, args.warmup)
            ratios.append(got["engine"] / got["bare"])
            print(f"{model} round {r}: engine {got['engine']:,.2f} samples/s, bare MLX loop {got['bare']:,.2f}, "
                  f"ratio {ratios[-1]:.3f}")
        median = statistics.median(ratios)
        worst.append(abs(median - 1))
        print(f"{model}: engine/bare median {median:.3f} [range {min(ratios):.3f}-{max(ratios):.3f}, "
              f"{len(ratios)} rounds] (target within 3 %)")
        print(f"  parity: {runs[-1].summary['parity']['words']}")
        torch_run = trainer.run(base)
        for c, v in by_framework([torch_run, runs[-1]]):
            print(f"  PyTorch {torch_run.summary['samples_per_s']:,.2f} samples/s; {verdict(c, v)}")
    print(f"largest |engine/bare - 1|: {max(worst):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
