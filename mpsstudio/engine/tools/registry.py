"""The measuring tools, one object each, in one table: its name and title, where it runs, whether the history
keeps its results, and the functions of its own module that carry it out in a run process, finish its answer from
a checkpoint, and re-derive its words on every read. `run`, `ended` and `checked` read the table; adding a tool is
its module (and its record under records/) plus one row here (docs/architecture.md, "Adding a tool").

`run` executes in the child; `checked` in the parent, on a dict that came over the pipe from a process that ran
a user's model, an imported file or a stored row: its kind's declared shape (records/: only plain JSON values,
within size limits, every field a view reads of the right type and range). This module imports no torch (the parent
may not have loaded it): a tool's functions are named here and imported when they are called.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..basics.config import MAX_BATCH, MODES, PRECISIONS, RunConfig
from ..basics.errors import UserError
from .argspec import DEVICES, Field, Option, Ref
from .generate.options import GENERATE_OPTIONS

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Tool:
    """One measuring tool. The functions are "module:function" under engine/tools, imported when called:
    - `run(config, payload, *, progress, should_stop, checkpoint) -> dict`: carried out in a run process
      (process.run_tool); config None for a tool that takes none (`needs_config` False). None: the tool runs as a
      series of runs or points instead (process/series.py: a sweep, a tune).
    - `ended(answer, how, said) -> dict`: its answer from the checkpoint it sent before a step it might not survive.
    - `rederived(result) -> dict`: its words (and judgements) from its numbers, on every read of a stored result.
    - `chosen(values, context) -> dict` and `plan(chosen, context) -> str`: what its sheet's fields (`options` with a
      field) mean as start_tool's {"config", "batch_sizes", "payload"}, and the line saying what it will do.
    - `section(result) -> (tables, chart)`: what a report shows of a result beside its sentence (torch-free), and
      the Tools tab where the tool has no view of its own (gui/tools/panel.py).
    - `arguments(values) -> dict`: its command's option values (by name) as its payload, and `failed(result) -> bool`
      (exit 1), for a tool whose command is the CLI's own (cli/tools.cmd_tool: it says `doing` while it runs, prints
      the section's tables and the sentence, and on Ctrl-C keeps what the tool found, `kept`).
    Its subcommand (`help`: "" for none) takes a run's setup first (`setup`; without --precision where the tool
    declares its own, `own_precision`), then `options`, whose fields also make its sheet (`what` opens it)."""

    name: str
    title: str
    menu: str = ""  # the window's Tools menu item ("": none), in the table's order
    shortcut: str = ""  # its key ("Ctrl+Shift+B": ⌘⇧B on a Mac)
    stored: bool = True  # the history keeps its results (records.SHAPES declares them)
    run: str | None = None
    needs_config: bool = True
    ended: str | None = None
    rederived: str | None = None
    help: str = ""
    setup: bool = False
    own_precision: bool = False
    options: tuple[Option, ...] = ()
    what: str = ""
    chosen: str | None = None
    plan: str | None = None
    section: str | None = None
    subject: str | None = None  # (result) -> str: what a result is of, after its title ("cpu and mps")
    on_model: bool = True  # its sheet names the setup's model and data (False: a check of the devices takes neither)
    every_device: bool = False  # the window runs it on every checked device (else on the first accelerator)
    since: str | None = None  # (result, earlier results of its kind, newest first) -> the result said beside them
    printed: str | None = None  # (result) -> (tables, notes): what its command prints before the sentence (None: the
    #   section's tables)
    baseline: str | None = None  # (result, a baseline result, its file's name, --fail-over) -> the result with
    #   `baseline` {"verdict": "a real change" | "cannot tell" | "no real change"}: --baseline FILE, exit 1 or 3
    doing: str = ""  # the command's line while it runs: {model} and {device} are the setup's
    arguments: str | None = None
    failed: str | None = None
    kept: str = "what it found so far"

    def call(self, which: str, *args: Any, **kwargs: Any) -> Any:
        target = getattr(self, which)
        module, _, function = target.partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), function)(*args, **kwargs)


ONE_DEVICE = "the device to {} (default: the first accelerator, else cpu)"
MODE = Option("--mode", "(default: train)", choices=MODES)
TRY = (("off", "no"), ("on", "yes"), ("both", "both, compared"))  # tune's --channels-last and --compile
BOTH = tuple(value for value, _ in TRY)  # what tune.options.parse_choice takes (tests/engine/tools/test_chosen.py)

TABLE = (
    Tool("sweep", "Batch-size sweep", "Batch-Size Sweep…", "Ctrl+Shift+B", section="toolview:sweep_section",
         every_device=True,
         help="throughput against batch size per device, and where the accelerator wins", setup=True,
         what="Throughput against batch size on each checked device, each point a short run with the run's rules, "
              "and where the accelerator starts to win.",
         chosen="chosen:sweep_chosen", plan="chosen:sweep_plan", options=(
             DEVICES,
             Option("--framework", "torch (the default) or mlx: the same model in MLX (bench --framework torch,mlx "
                    "compares them)", choices=("torch", "mlx")),
             Option("--batch-sizes", "comma-separated batch sizes (default: 1,2,4,... up to 512, per device up to the "
                    "first that does not fit)", metavar="LIST",
                    field=Field("Batch sizes:", "text", "Batch sizes to measure, separated by commas (--batch-sizes).",
                                initial=Ref("chosen:sweep_sizes_text"))),
             Option("--steps", "measured steps per point (default: 24)", type=int,
                    field=Field("Measured steps:", "whole", "Measured steps per point (--steps).",
                                initial=Ref("sweep:DEFAULT_STEPS"), low=1, high=100_000)),
             Option("--warmup", "warm-up steps per point (default: 3)", type=int,
                    field=Field("Warm-up steps:", "whole", "Warm-up steps per point, timed apart (--warmup).",
                                initial=Ref("sweep:DEFAULT_WARMUP"), high=10_000)),
             MODE)),
    Tool("max-batch", "Largest batch", "Find Largest Batch…", "Ctrl+Shift+M", run="maxbatch:run_tool",
         ended="maxbatch_answer:from_checkpoint", section="toolview:max_batch_section",
         doing="searching how much of {model} trains on {device}", arguments="maxbatch_answer:arguments",
         failed="maxbatch_answer:found_none", kept="the search so far",
         help="the largest batch that trains (full training steps) and the fastest", setup=True,
         what="The largest batch that trains (full training steps) on the device, doubling then bisecting to the "
              "exact boundary, under the memory limit.",
         chosen="chosen:max_batch_chosen", plan="chosen:max_batch_plan", options=(
             Option("--device", ONE_DEVICE.format("search on")),
             Option("--memory-limit", "memory a batch may use, e.g. 8G (default: MPS's recommended maximum; on the "
                    "CPU half the available RAM; CUDA: the card)", metavar="SIZE",
                    field=Field("Memory limit:", "text", "Memory a batch may use, e.g. 8G (--memory-limit).",
                                initial="", placeholder="the device's own limit")),
             Option("--max-batch", "largest batch to try (default: 65536)", type=int, metavar="N",
                    field=Field("Largest batch to try:", "whole", "The largest batch to try (--max-batch).",
                                initial=Ref("chosen:max_batch_cap"), low=1, high=MAX_BATCH,
                                note=Ref("chosen:max_batch_note"))),
             Option("--longest-sequence", "search the longest sequence of a token model that trains at --at-batch "
                    "instead (up to the positions it takes; --max-batch caps the length)", action="store_true",
                    field=Field("Search:", "check", "The longest sequence of a token model that trains at the batch "
                                "below, instead of the largest batch (--longest-sequence).", initial=False,
                                text="the longest sequence instead")),
             Option("--at-batch", "the batch of the longest-sequence search (default: 1)", type=int, metavar="N",
                    field=Field("At batch:", "whole", "The batch of the longest-sequence search (--at-batch).",
                                initial=1, low=1, high=MAX_BATCH, enabled_when=("longest_sequence", True))))),
    Tool("inspect", "Inspection", "Inspect Model (CPU Fallback, Parity)…", "Ctrl+Shift+I", run="inspection:run_tool",
         rederived="toolview:inspect_rederived", section="toolview:inspect_section",
         help="CPU-fallback operations and numerical parity with the CPU (float64) on one device, and its functional "
              "check", setup=True,
         what="Which operations fall back to the CPU on the device, and whether it computes the same as the CPU in "
              "float64 (a fixed parity batch of 8 samples).",
         chosen="chosen:inspect_chosen", options=(
             Option("--device", ONE_DEVICE.format("inspect")),
             Option("--batch-size", "batch of the recorded training step (default: 64)", type=int,
                    field=Field("Batch of the recorded step:", "whole", "The batch of the training step whose "
                                "operations are recorded (--batch-size).", initial=Ref("chosen:setup_batch"), low=1,
                                high=MAX_BATCH)))),
    Tool("diagnose", "Diagnosis", "Diagnose (Why Slow, Memory, Wrong Layer)…", "Ctrl+Shift+G",
         every_device=True,
         run="diagnose:run_tool", ended="diagnose:from_checkpoint", rederived="diagnose.view:rederived",
         section="diagnose.view:section",
         help="why a training step is slow (data, launch, CPU fallback, syncs or compute), where its memory goes, and "
              "which layer computes wrong, per device", setup=True,
         what="Why a training step takes what it takes on each checked device (data, launch, CPU fallback, syncs or "
              "compute), where its memory goes, and which layer computes wrong.",
         chosen="chosen:diagnose_chosen", options=(
             DEVICES,
             Option("--batch-size", "samples per step (default: 64)", type=int),
             Option("--workers", "data loader worker processes (default: 0)", type=int),
             MODE,
             Option("--channels-last", "images in NHWC memory order", action="store_true"),
             Option("--layers", "compare every layer with the float64 CPU reference and name the first beyond "
                    "tolerance (done anyway when the whole model's parity fails)", action="store_true",
                    field=Field("", "check", initial=True,
                                text="Compare each layer with the CPU (finds the layer that computes wrong)")),
             Option("--after-steps", "train K steps on the device, then check the parity again (some bugs appear "
                    "only with state)", type=int, default=0, metavar="K",
                    field=Field("After training steps:", "whole", "Train this many steps first, to diagnose the "
                                "model as training has changed it (--after-steps).", initial=0, high=100_000)))),
    Tool("deploy-bench", "Deploy benchmark", "Deploy Benchmark (PyTorch, Core ML)…", "Ctrl+Shift+D",
         every_device=True,
         run="deploy.deploybench:run_tool", needs_config=False,
         ended="deploy.deploybench:from_checkpoint", section="toolview:deploy_section",
         help="inference on the CPU, the GPU and (on macOS) Core ML's compute units, side by side, with agreement",
         what="Inference of the model on each checked device, at each batch size (and Core ML's compute units on "
              "macOS).",
         chosen="chosen:deploy_chosen", options=(
             Option("--models", "comma-separated models, e.g. resnet18,mobilenet_v3_small (default: mlp)",
                    metavar="LIST"),
             Option("--model", "one model (name or .py file)"),
             Option("--weights", "trained weights for a single model", metavar="FILE.pt"),
             Option("--batch-sizes", "comma-separated (default: 1,8,32)", metavar="LIST",
                    field=Field("Batch sizes:", "text", "Batch sizes of the inference (--batch-sizes).",
                                initial="1, 8, 32")),
             Option("--devices", "PyTorch devices (default: every available one)"),
             Option("--compress", "Core ML packages with compressed weights measured beside the fp16 one: int8, "
                    "palettize4 or both (comma-separated)", metavar="LIST",
                    field=Field("Core ML compression:", "checks", "A Core ML package with compressed weights, as "
                                "rows of its own (macOS; --compress).", initial=(),
                                items=(("int8", "int8 weights"), ("palettize4", "4-bit palettes")))),
             Option("--timeout", "end it when it takes longer", type=float, metavar="SECONDS"),
             Option("--json", "write the result to FILE", metavar="FILE"),
             Option("--no-save", "do not keep the result in the history", action="store_true"))),
    Tool("tune", "Best settings", "Best Settings (Precision, Layout, Batch)…", "Ctrl+Shift+T",
         every_device=True,
         rederived="tune.report:rederived_checked", section="toolview:tune_section",
         help="which precision, channels_last, compile, batch size (and CPU threads) make this model fastest here, "
              "at what cost in memory and loss", setup=True, own_precision=True,
         what="Which precision, memory layout, compile and batch size make the model fastest on each checked device, "
              "each candidate a short run in rounds, at what cost in memory and loss (against fp32) and one step's "
              "parity with the CPU in float64; the recommendation only where it beats your current settings beyond "
              "the noise.",
         chosen="chosen:tune_chosen", plan="chosen:tune_plan", options=(
             DEVICES,
             Option("--framework", "torch (the default) or mlx: tune the same model in MLX (precisions, compile, "
                    "batch sizes)", choices=("torch", "mlx")),
             Option("--batch-size", "your current batch (default: 64); the candidates are around it", type=int),
             Option("--batch-sizes", "comma-separated batch sizes to try (default: half, it and double, within the "
                    "training set)", metavar="LIST",
                    field=Field("Batch sizes:", "text", "Batch sizes to try, separated by commas (--batch-sizes; by "
                                "default half, the setup's and double).", initial=Ref("chosen:tune_sizes_text"))),
             Option("--precision", "your current precision (default: fp32)", choices=PRECISIONS),
             Option("--precisions", "precisions to try (default: fp32,bf16,fp16; those a device cannot run are "
                    "listed with why)", metavar="LIST",
                    field=Field("Precisions:", "checks", "Precisions to try (--precisions); one a device cannot run "
                                "is listed with why.", initial=("fp32", "bf16", "fp16"), inline=True,
                                items=(("fp32", "fp32"), ("bf16", "bf16"), ("fp16", "fp16")))),
             Option("--channels-last", "try the channels_last layout (default: both for image models, off otherwise)",
                    dest="try_channels_last", choices=BOTH,
                    field=Field("channels_last:", "choice", "Try the channels_last memory layout (--channels-last); "
                                "image input only.", initial="both", items=TRY)),
             Option("--compile", "try torch.compile (default: off; its compile time is reported apart)",
                    dest="try_compile", choices=BOTH,
                    field=Field("torch.compile:", "choice", "Try torch.compile (--compile); its compile time is "
                                "reported apart. On MPS PyTorch calls it a prototype.", initial="off", items=TRY)),
             Option("--threads-to-try", "CPU thread counts to try beside torch's default (default: half the cores, "
                    "on 4 or more)", dest="thread_counts", metavar="LIST"),
             Option("--tf32-to-try", "CUDA fp32's TF32 settings to try: off, conv (convolutions only, PyTorch's "
                    "default), all (default: off,conv,all); your current one is --tf32 or --tf32-conv",
                    dest="tf32_values", metavar="LIST"),
             Option("--budget", "time for the rounds (default: 10); the parity checks come after", type=float,
                    metavar="MINUTES",
                    field=Field("Time budget:", "minutes", "Time for the rounds (--budget); the parity checks come "
                                "after, a few seconds each.", initial=Ref("tune:DEFAULT_BUDGET_MIN"), low=0.5,
                                high=Ref("tune:MAX_BUDGET_MIN"), suffix=" min")),
             Option("--rounds", "at most this many rounds of every candidate (default: 7, as many as the budget "
                    "allows); the fastest, while tied or its interval is wider than ±5%%, get up to 6 more", type=int),
             Option("--steps", "measured steps a candidate a round (default: 16)", type=int,
                    field=Field("Measured steps:", "whole", "Measured steps a candidate a round (--steps).",
                                initial=Ref("tune:DEFAULT_STEPS"), low=1, high=100_000)),
             Option("--warmup", "warm-up steps a candidate a round (default: 3)", type=int))),
    Tool("export", "Export", "Export Model…", "Ctrl+Shift+E", run="deploy.export:run_tool",
         section="toolview:export_section",
         help="the model as TorchScript, a torch.export program or a Core ML package, checked against PyTorch",
         what="The model as a file another program loads, loaded back and compared with PyTorch on a fixed batch.",
         chosen="chosen:export_chosen", plan="chosen:export_plan", options=(
             Option("--model", "model name or a .py file (default: the one --weights names, else mlp)"),
             Option("--dataset", "dataset the input shape, normalisation and classes come from (default: shapes; "
                    "with --weights: the one it was trained on)"),
             Option("--weights", "trained weights saved by MPS Studio (bench --save-model, Save Trained Model…), with "
                    "their .json beside them (default: the model as freshly built)", metavar="FILE.pt",
                    field=Field("Export:", "choice", "What is exported: a run's trained weights (select the run in "
                                "Runs), or the model as built, untrained.", items=Ref("chosen:export_sources"))),
             Option("--run", "the trained weights a run in the history saved (bench --save-model); instead of "
                    "--weights", metavar="ID"),
             Option("--format", "torchscript (.pt), exported-program (torch.export, .pt2) or coreml (.mlpackage)",
                    required=True, choices=("torchscript", "exported-program", "coreml"),
                    field=Field("Format:", "choice", items=Ref("chosen:FORMAT_TITLES"))),
             Option("--out", "where to write the export", required=True, metavar="PATH"),
             Option("--precision", "Core ML compute precision (default: fp32; the other formats keep the model's)",
                    default="fp32", choices=("fp32", "fp16"),
                    field=Field("Precision:", "choice", items=(
                        ("fp32", "fp32"), ("fp16", "fp16 (half the size; Core ML's Neural Engine computes in it)")))),
             Option("--compress", "Core ML weights: int8 (linear) or palettize4 (4-bit palettes); the size is said "
                    "beside the uncompressed package's", choices=("int8", "palettize4"),
                    field=Field("Compression:", "choice", "Core ML only: weights stored compressed (--compress).",
                                items=((None, "none"), ("int8", "int8 weights"), ("palettize4", "4-bit palettes")),
                                enabled_when=("format", "coreml"))),
             Option("--batch-size", "the batch the export is made and checked with (default: 1; a Core ML package's "
                    "default shape)", type=int, default=1),
             Option("--batch-sizes", "Core ML: the batch sizes the one package takes, e.g. 1,8,32 (enumerated shapes, "
                    "each of which the Neural Engine can run); default: --batch-size only", metavar="LIST"),
             Option("--timeout", "end the export when it takes longer", type=float, metavar="SECONDS"),
             Option("--json", "write what was exported and its check to FILE", metavar="FILE"),
             Option("--no-mps-fallback", "", dest="mps_fallback", action="store_false", hidden=True))),
    Tool("check", "Correctness check", "Check Devices (Correct Results)…", "Ctrl+Shift+K", run="check.suite:run_tool",
         every_device=True,
         needs_config=False, rederived="check.words:check_rederived", section="check.words:check_section",
         subject="check.words:subject", on_model=False, since="check.since:since", baseline="check.since:against",
         printed="check.words:check_printed",
         doing="checking each device's results against a float64 CPU reference", arguments="check.words:arguments",
         failed="check.words:failed", kept="what was checked so far",
         help="is the device right today: operations with known failure shapes (transposed and K >= 32767 matrix "
              "products, Linear, attention, common layers) against a float64 CPU reference, fresh, after a large "
              "allocation, after emptying the cache and twice",
         what="Whether each checked device computes right today: a suite of operations with known failure shapes, "
              "each against a float64 CPU reference, in four states of the device.",
         chosen="chosen:check_chosen", plan="chosen:check_plan", options=(
             DEVICES,
             Option("--processes", "fresh processes that time matrix products, to see a kernel chosen per process "
                    "(default: 10; 0: no timing)", type=int, metavar="N",
                    field=Field("Fresh processes:", "whole", "Fresh processes that each time a few matrix products, "
                                "to see a slow kernel chosen in some (--processes; 0: none).",
                                initial=Ref("check.words:PROCESSES"), high=Ref("check.words:MAX_PROCESSES"))),
             Option("--model", "add your model as a whole: a built-in name, a .py file or a model folder, against "
                    "float64 in the suite's states, and its training step in the fresh processes", metavar="MODEL",
                    field=Field("", "check", initial=False, text="Also check the setup's model as a whole (its "
                                "forward and backward against float64, its step in the fresh processes)")),
             Option("--dataset", "with --model: its data (default: synthetic)", metavar="NAME"),
             Option("--python", "check with another Python environment's torch: its python (a venv's or a conda "
                    "env's); the check then says what changed since the last one here", metavar="PATH"),
             Option("--baseline", "compare with an earlier check's --json FILE: exit 1 for a real change (a case now "
                    "wrong, a product slower beyond --fail-over with its processes' ranges apart, a slower mode), 3 "
                    "when it cannot tell, never for noise", metavar="FILE"),
             Option("--fail-over", "with --baseline: the slowdown of a product that counts (default: 5%%)",
                    metavar="PERCENT"),
             Option("--timeout", "end the check when it takes longer", type=float, metavar="SECONDS"),
             Option("--json", "write the result to FILE", metavar="FILE"),
             Option("--no-save", "do not keep the result in the history", action="store_true"))),
    Tool("generate", "Generation speed", "Generation Speed (Prefill, Decode)…", "Ctrl+Shift+N",
         run="generate.timing:run_tool", rederived="generate.words:rederived", section="generate.words:section",
         subject="generate.words:subject", every_device=True, own_precision=True, setup=True,
         failed="generate.words:failed", arguments="generate.words:arguments", doing="generating with {model}",
         kept="what was measured so far",
         help="a language model folder's generation speed: time to the first token, prefill and decode tokens/s at "
              "each context length, on each device and precision, with intervals",
         what="How fast the model folder generates: the time to its first token, prefill and decode tokens/s after "
              "each context length, greedy with its cache, on each checked device, repeated for an interval.",
         chosen="generate.words:chosen", plan="generate.words:plan", options=GENERATE_OPTIONS),
    Tool("devices", "Device check", stored=False, run="inspection:check_devices", needs_config=False),
)
TOOLS = {tool.name: tool for tool in TABLE}
IN_A_PROCESS = tuple(t.name for t in TABLE if t.run)  # what process.run_tool carries out
STORED = tuple(t.name for t in TABLE if t.stored)  # the kinds the history keeps
TITLES = {t.name: t.title for t in TABLE}


def run(name: str, payload: dict, *, progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        checkpoint: Callable[[dict | None, float | None], None] | None = None) -> dict:
    """Carry out one tool in this process (a run's process); UserError (one sentence) for bad input.
    `checkpoint(result, deadline_s)`: the tool's answer should it not end within `deadline_s` (a step that can hang
    in native code); `(None, None)` withdraws it (process.run_tool ends the process and takes that answer)."""
    tool = TOOLS.get(name)
    if tool is None or tool.run is None:
        raise UserError(f"Unknown tool {str(name)[:40]!r}; the tools are {', '.join(IN_A_PROCESS)}.")
    if not isinstance(payload, dict):
        raise UserError(f"The {name} tool needs its settings.")
    config = None
    if tool.needs_config:
        if not isinstance(payload.get("config"), dict):
            raise UserError(f"The {name} tool needs a run configuration.")
        config = RunConfig.from_dict(payload["config"])
    return tool.call("run", config, payload, progress=progress, should_stop=should_stop, checkpoint=checkpoint)


def ended(name: str, answer, how: str) -> dict:
    """A tool's answer from the checkpoint it sent before a step it might not survive, when its process died or
    passed the checkpoint's deadline (`how`, one sentence): what its module's `ended` makes of it (the diagnosis as
    it stood, with how it ended in place of its "{how}"; for max-batch, the probes to resume from in a fresh process,
    the one it died in failed: `resume`). UserError when the tool sends no checkpoints or this one cannot be read."""
    from ..basics.shape import ShapeError

    tool = TOOLS.get(name)
    if tool is None or tool.ended is None:
        raise UserError(how)
    said = how.rstrip(".")
    try:
        return tool.call("ended", answer, how, said[:1].lower() + said[1:])
    except ShapeError:
        raise UserError(f"{how} What it had found could not be read.") from None


def validated(name: str, result) -> dict:
    """`result` of tool `name` as its declared shape (records/) has it, with the words re-derived from its numbers;
    ShapeError naming the field otherwise."""
    from ..basics.shape import ShapeError
    from .records import SHAPES

    if name not in SHAPES:
        raise ShapeError("", f"is of a kind no tool makes ({name[:40]!r})")
    try:
        result = SHAPES[name].check(result)
    except RecursionError:
        raise ShapeError("", "is nested too deep") from None
    tool = TOOLS[name]
    return tool.call("rederived", result) if tool.rederived else result


def checked(name: str, result, where: str | None = None) -> dict:
    """`result` of tool `name` as the front ends may read it (validated); UserError naming the field when it is not.
    `where` says where it came from ("The file x.json"); by default the tool's process."""
    from ..basics.shape import ShapeError

    try:
        return validated(name, result)
    except ShapeError as exc:
        source, verb = (where, "holds") if where else (f"The {name} tool's process", "sent")
        article = "an" if name[:1] in "aeiou" else "a"
        raise UserError(f"{source} {verb} {article} {name} result whose {exc.path or 'content'} {exc.why}, so it was "
                        "not kept.") from None
