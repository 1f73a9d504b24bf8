"""The argument groups several subcommands share: a run's setup (config_args), what one sample is (input_args), several
GPUs (gpu_args) and a model folder's fine-tuning (finetune_args). parser.py builds the subcommands from them."""

from __future__ import annotations

import argparse

from ..engine.basics.config import OPTIMIZERS, PRECISIONS, parse_input_shape
from ..engine.basics.errors import UserError


def input_shape(text: str) -> list[int]:
    """"3,224,224" -> [3, 224, 224]; "128" -> [128]; argparse says the error in one line."""
    try:
        return parse_input_shape(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)[0].lower() + str(exc)[1:].rstrip(".")) from None


def gpu_args(p: argparse.ArgumentParser) -> None:
    """--gpus and torchrun's options for several machines (engine/run/distributed.py)."""
    g = p.add_argument_group("several GPUs (torchrun, DistributedDataParallel)")
    g.add_argument("--gpus", default=None, metavar="N|N,N,...",
                   help="train on N CUDA GPUs of this machine, one rank each (--batch-size per GPU); a list (1,2,4) "
                        "runs each count, interleaved, and reports the scaling; with --devices cpu, N processes "
                        "share the CPU (to try the path)")
    g.add_argument("--rank-timeout", type=float, default=None, metavar="SECONDS",
                   help="how long a rank waits for the others before the run fails (default: 120)")
    for flag, what in (("--nnodes", "machines in the run (torchrun's --nnodes)"),
                       ("--node-rank", "this machine's rank (with --master-addr)"),
                       ("--rdzv-backend", "rendezvous backend, e.g. c10d"),
                       ("--rdzv-endpoint", "rendezvous HOST:PORT every machine reaches"),
                       ("--rdzv-id", "a job id shared by the machines"), ("--master-addr", "rank 0's machine"),
                       ("--master-port", "its port")):
        g.add_argument(flag, default=None, metavar=flag.strip("-").split("-")[-1].upper(),
                       help=f"passed to torchrun: {what}")


def input_args(p: argparse.ArgumentParser) -> None:
    """--image-size, --input-shape and --num-classes: what one sample is (run.setup.synthetic_input)."""
    p.add_argument("--image-size", type=int, default=None,
                   help="a folder's images are decoded at this size; synthetic images are this size")
    p.add_argument("--input-shape", type=input_shape, default=None, metavar="C,H,W|L",
                   help="synthetic data: one sample's shape (C,H,W images or L tokens; default: the model's own, or "
                        "its file's INPUT_SHAPE)")
    p.add_argument("--num-classes", type=int, default=None,
                   help="synthetic data: the number of classes (default: the model's, or its file's NUM_CLASSES)")
    p.add_argument("--seq-len", type=int, default=None, metavar="L",
                   help="tokens per sample (a model folder's default: a quarter of its positions, at most 512)")
    p.add_argument("--text-layout", choices=("packed", "padded"), default=None,
                   help="a text dataset's sequences: packed (examples one after another; plain text's default) or "
                        "padded (one example a sequence; chat's and prompt/completion's default)")


def finetune_args(p: argparse.ArgumentParser) -> None:
    """How a Hugging Face model folder is fine-tuned (models/hf_model.py)."""
    g = p.add_argument_group("a Hugging Face model folder (--model FOLDER with config.json)")
    g.add_argument("--finetune", choices=("full", "lora", "head"), default=None,
                   help="every weight (full, the default), LoRA adapters (peft) or the task head only")
    g.add_argument("--lora-rank", type=int, default=None, help="LoRA's rank (default 8)")
    g.add_argument("--lora-alpha", type=int, default=None, help="LoRA's alpha (default 16)")
    g.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute activations in the backward pass: less memory, more time")
    g.add_argument("--quantize", type=int, choices=(4, 8), default=None, metavar="BITS",
                   help="the MLX side's weights in 4 or 8 bits, as mlx-lm's convert -q makes them, LoRA trained on "
                        "them (QLoRA; --framework mlx or torch,mlx, --finetune lora); PyTorch's run keeps its "
                        "precision: not the same arithmetic, said")


def math_args(p: argparse.ArgumentParser) -> None:
    """--tf32, --tf32-conv and --threads: how PyTorch computes (the same words in bench and the tools)."""
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 on CUDA: in convolutions, as PyTorch's default does, and in matrix products")
    p.add_argument("--tf32-conv", action="store_true",
                   help="allow TF32 on CUDA in convolutions only (PyTorch's default)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch")


def config_args(p, *, precision: bool = True) -> None:
    p.add_argument("--model", default=None, help="model name (see `mpsstudio models`), a .py file or a Hugging Face "
                                                 "model folder (default: mlp)")
    p.add_argument("--dataset", default=None, help="dataset name or an image folder (default: shapes)")
    if precision:
        p.add_argument("--precision", choices=PRECISIONS, default=None, help="(default: fp32)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help="(default: sgd)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: 0.01)")
    math_args(p)
    input_args(p)
    p.add_argument("--seed", type=int, default=None, help="random seed (default: 0)")
    p.add_argument("--no-mps-fallback", dest="mps_fallback", action="store_false", default=None,
                   help="stop at an operation MPS lacks instead of running it on the CPU")
    p.add_argument("--cast-float64", action="store_true",
                   help="on MPS, cast the model's float64 / complex128 tensors to float32 / complex64")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="end the tool (a sweep: each point) when it takes longer")
    p.add_argument("--json", metavar="FILE", default=None, help="write the result to FILE")
    p.add_argument("--no-save", action="store_true", help="do not keep the result in the history")
    finetune_args(p)


def add_options(p: argparse.ArgumentParser, options) -> None:
    """A tool's options as its row declares them (engine/tools/argspec.Option): the same argument the sheet's field
    sets."""
    for option in options:
        kwargs = {"dest": option.dest or None, "type": option.type, "metavar": option.metavar,
                  "choices": option.choices, "help": argparse.SUPPRESS if option.hidden else option.help}
        if option.action:
            kwargs.update(action=option.action, type=None, metavar=None)
        if option.action != "store_true":  # a flag is False unless given; every other option says its default
            kwargs["default"] = option.default
        if option.required:
            kwargs["required"] = True
        p.add_argument(option.flag, **{k: v for k, v in kwargs.items() if v is not None or k == "default"})
