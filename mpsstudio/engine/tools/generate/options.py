"""`mpsstudio generate`'s options and the window's sheet for them (its row in registry.TABLE names them). No torch."""

from __future__ import annotations

from ..argspec import DEVICES, Field, Option, Ref

GENERATE_OPTIONS = (
    DEVICES,
    Option("--contexts", "comma-separated prompt lengths in tokens (default: 128,512; those past the "
           "model's positions are left out, said)", metavar="LIST",
           field=Field("Context lengths:", "text", "Prompt lengths in tokens, separated by commas "
                       "(--contexts).", initial="128, 512")),
    Option("--new-tokens", "tokens generated after each prompt (default: 64)", type=int, metavar="N",
           field=Field("New tokens:", "whole", "Tokens generated after the prompt (--new-tokens).",
                       initial=Ref("generate.words:NEW_TOKENS"), low=2, high=Ref("generate.words:MAX_NEW"))),
    Option("--repeats", "repetitions of each setup after its warm-up (default: 7)", type=int, metavar="N",
           field=Field("Repetitions:", "whole", "Timed repetitions of each setup (--repeats); 9 or more "
                       "give the median's 95 % interval, fewer their range.",
                       initial=Ref("generate.words:REPEATS"), low=1, high=Ref("generate.words:MAX_REPEATS"))),
    Option("--precisions", "the model's weights in these (default: fp32)", metavar="LIST",
           field=Field("Precisions:", "checks", "The model's weights cast to each (--precisions).",
                       initial=("fp32",), inline=True,
                       items=(("fp32", "fp32"), ("bf16", "bf16"), ("fp16", "fp16")))),
    Option("--frameworks", "torch, mlx or torch,mlx: transformers' generate, mlx-lm's generate_step, or both on the "
           "same prompt (default: torch)", metavar="LIST",
           field=Field("Frameworks:", "checks", "Generate with PyTorch (transformers) and/or MLX (mlx-lm), the same "
                       "prompt and lengths (--frameworks).", initial=("torch",), inline=True,
                       items=(("torch", "PyTorch"), ("mlx", "MLX (mlx-lm)")))),
    Option("--batch-size", "sequences generated at once (default: 1)", type=int, field=Field(
        "Sequences at once:", "whole", "Sequences generated together (--batch-size).", initial=1, low=1,
        high=4096)),
)
