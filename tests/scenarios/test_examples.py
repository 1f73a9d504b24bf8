"""Every example under examples/ runs as its docstring says, on the CPU (issue 56): the `mpsstudio bench` or `mpsstudio
run` command each docstring shows, its devices narrowed to the CPU and its sizes kept small; the Trainer example's
batch and learning rate read right through accelerate's wrapper, and its --bf16 run on the CPU."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest

from mpsstudio import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMMAND = re.compile(r"`?mpsstudio ((?:bench|run) [^`]*?)(?:`|\n\s*\n|$)", re.S)
# what each kind of command gets to stay small here (the docstring's own flags are kept)
SMALL = {"bench": ["--steps", "3", "--warmup", "1", "--batch-size", "2"], "run": ["--warmup", "1"]}
SCRIPT_ARGS = {"hf_trainer_finetune.py": ["--steps", "12", "--batch-size", "4", "--seq-len", "16"]}


def docstring_command(path: Path) -> list[str]:
    """The mpsstudio command an example's docstring shows, as arguments: devices narrowed to the CPU, a model folder
    placeholder and optional flags ("[--bf16]") taken as given."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    found = COMMAND.search(doc)
    assert found, f"{path.name}'s docstring shows no mpsstudio command"
    args = shlex.split(" ".join(found.group(1).split()).replace("[", "").replace("]", ""))
    if "--devices" in args:
        args[args.index("--devices") + 1] = "cpu"
    else:
        args[1:1] = ["--devices", "cpu"]
    return args


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_each_example_runs_as_its_docstring_says_on_the_cpu(name, tmp_path, capsys):
    args = docstring_command(EXAMPLES / name)
    kind = args[0]
    args = [a.replace("examples/", f"{EXAMPLES}/") for a in args]
    folder = None
    if "FOLDER" in args:
        from tests.support.hf_folders import gpt_causal_lm

        folder = gpt_causal_lm(tmp_path / "gpt")
        args = [str(folder) if a == "FOLDER" else a for a in args]
    cut = args.index("--") if "--" in args else len(args)
    out = tmp_path / "runs.json"
    mine = [*args[:cut], *SMALL[kind], "--json", str(out)]
    theirs = [*args[cut:], *SCRIPT_ARGS.get(name, [])] if cut < len(args) or name in SCRIPT_ARGS else []
    if theirs and theirs[0] != "--":
        theirs = ["--", *theirs]
    code = cli.main([*mine, *theirs])
    captured = capsys.readouterr()
    assert code == cli.EXIT_OK, captured.out[-2000:] + captured.err[-2000:]
    [run] = json.loads(out.read_text())["runs"]
    assert run["status"] == "finished" and run["config"]["device"] == "cpu", run.get("error")
    if name == "hf_trainer_finetune.py":  # transformers' Trainer calls the model through accelerate's wrapper
        said = run["summary"]["script_settings"]
        assert run["config"]["batch_size"] == 4 and "from nothing" not in captured.err + captured.out
        # the linear schedule's rate at the first measured step (5e-5 x (1 - 1/12)), not the 0 it ends at
        assert said["lr"] == pytest.approx(5e-5 * (1 - 1 / 12))
        assert said["autocast"] == "bf16"  # --bf16 on the CPU: autocast there (use_cpu), not refused


def test_every_example_shows_a_command_that_can_be_read():
    for path in EXAMPLES.glob("*.py"):
        args = docstring_command(path)
        assert args[0] in ("bench", "run") and args[args.index("--devices") + 1] == "cpu"
