"""A Hugging Face model folder as a model (models/hf_folder.py, hf_model.py): tiny folders the tests write with
save_pretrained train under the engine on the CPU, in full, with LoRA and head only; folders that are not one get
one sentence each."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.summary_fields import RunSummary
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.models import hf_folder, registry
from mpsstudio.engine.run import trainer
from tests.support import hf_folders

MAKERS = {"bert": hf_folders.bert_classifier, "gpt": hf_folders.gpt_causal_lm, "vit": hf_folders.vit_classifier}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {name: make(root / name) for name, make in MAKERS.items()}


def run(folder, **changes):
    config = dict(model=str(folder), dataset="synthetic", steps=4, warmup_steps=1, epochs=None, batch_size=4)
    return trainer.run(RunConfig(**{**config, **changes}))


@pytest.mark.parametrize("name, finetune", [("bert", "full"), ("bert", "lora"), ("gpt", "full"), ("gpt", "lora"),
                                            ("vit", "full"), ("vit", "lora"), ("gpt", "head")])
def test_each_folder_trains_full_lora_and_head_with_its_trainable_parameters(folders, name, finetune):
    result = run(folders[name], options={"finetune": finetune})
    assert result.status == "finished", result.error
    s = result.summary
    assert s.samples_per_s > 0 and s.peak_memory > 0 and s.memory_measure == "rss_growth"
    assert 0 < s.trainable_parameters <= s.parameters
    if finetune == "full":
        assert s.trainable_parameters == s.parameters
    else:
        assert s.trainable_parameters < s.parameters / 2
    if name != "vit":
        assert s.seq_len == 16 and s.tokens_per_s == pytest.approx(s.samples_per_s * 16)
    else:
        assert "tokens_per_s" not in s.as_dict()


def test_the_sequence_length_is_the_runs_and_the_default_is_said(folders):
    info = registry.get_model_info(str(folders["gpt"]))
    assert info.folder and info.default_spec.seq_len == 16  # a quarter of its 64 positions
    assert "GPT2LMHeadModel (causal LM)" in info.description
    result = run(folders["gpt"], input_shape=[32])
    assert result.status == "finished", result.error and result.summary.seq_len == 32
    too_long = run(folders["gpt"], input_shape=[65])
    assert too_long.status == "failed" and "at most 64 positions, not 65" in too_long.error


def test_a_folder_without_config_json_is_one_sentence(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="has no config.json, so it is not a Hugging Face model folder"):
        hf_folder.read_folder(str(tmp_path / "empty"))


def test_an_unknown_architecture_is_one_sentence(folders, tmp_path):
    folder = hf_folders.bert_classifier(tmp_path / "odd")
    hf_folders.edit_config(folder, architectures=["BertForTokenClassification"])
    with pytest.raises(UserError, match="BertForTokenClassification, whose task MPS Studio does not know"):
        registry.get_model_info(str(folder))


def test_remote_code_is_never_run(tmp_path):
    folder = hf_folders.gpt_causal_lm(tmp_path / "remote")
    hf_folders.edit_config(folder, auto_map={"AutoModelForCausalLM": "modeling_evil.EvilLM"})
    (folder / "modeling_evil.py").write_text("raise SystemExit('ran')\n")
    with pytest.raises(UserError, match="needs code of its own .* which MPS Studio never runs"):
        registry.get_model_info(str(folder))


def test_pickle_weights_are_refused(tmp_path):
    folder = hf_folders.gpt_causal_lm(tmp_path / "pickle")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(UserError, match="only as a pickle .* loading a pickle runs code"):
        registry.get_model_info(str(folder))


def test_a_config_that_is_not_json_is_one_sentence(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="config.json in 'bad' cannot be read"):
        hf_folder.read_folder(str(tmp_path / "bad"))
    (tmp_path / "bad" / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(UserError, match="is not a JSON object"):
        hf_folder.read_folder(str(tmp_path / "bad"))


def test_a_folder_with_a_dataset_is_told_to_use_synthetic(folders):
    result = run(folders["bert"], dataset="shapes")
    assert result.status == "failed" and "(--dataset synthetic)" in result.error


@pytest.mark.parametrize("options, words", [({"finetune": "qlora"}, "Unknown fine-tuning 'qlora'"),
                                            ({"finetune": "lora", "lora_rank": 0}, "LoRA rank must be")])
def test_bad_fine_tuning_is_one_sentence(options, words):
    with pytest.raises(UserError, match=words):
        hf_folder.finetune_of(options)


@pytest.mark.parametrize("name", ["bert", "gpt", "vit"])
@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_bench_of_a_folder_says_tokens_per_second_what_trains_and_its_memory(folders, name, finetune, tmp_path, capsys):
    from mpsstudio import cli

    out = tmp_path / "runs.json"
    length = [] if name == "vit" else ["--seq-len", "24"]
    code = cli.main(["bench", "--model", str(folders[name]), "--dataset", "synthetic", "--devices", "cpu", "--steps",
                     "4", "--warmup", "1", "--batch-size", "4", "--finetune", finetune, *length, "--json", str(out)])
    stdout = capsys.readouterr().out
    assert code == 0
    [run] = json.loads(out.read_text())["runs"]
    s = RunSummary.made(run["summary"])
    assert run["config"]["options"]["finetune"] == finetune and "Peak memory" in stdout
    assert s.memory_measure == "rss_growth" and "peak_memory" in s.as_dict()
    if name == "vit":
        assert "tokens/s" not in stdout
    else:
        assert "tokens/s (measured; counts every position of the 24-token sequences (synthetic))" in stdout and run["config"]["input_shape"] == [24]
    if finetune == "lora":
        assert f"cpu: trains {s.trainable_parameters:,} of {s.parameters:,} parameters (LoRA)" in stdout
    else:
        assert s.trainable_parameters == s.parameters
        assert f"cpu: trains all {s.parameters:,} parameters (full fine-tuning)" in stdout  # said as LoRA's is
    if name == "gpt" and finetune == "lora":
        assert s.trainable_parameters == 2_048  # rank 8 on c_attn (32 -> 96), 2 layers


def test_the_cli_refuses_a_bad_lora_rank_before_anything_runs(folders, capsys):
    from mpsstudio import cli

    code = cli.main(["bench", "--model", str(folders["gpt"]), "--dataset", "synthetic", "--devices", "cpu",
                     "--finetune", "lora", "--lora-rank", "0"])
    assert code == 2 and "The LoRA rank must be a whole number from 1" in capsys.readouterr().err


def test_the_safetensors_headers_give_the_parameters_without_loading(folders):
    from mpsstudio.engine.models import registry as models

    built = models.build_model(str(folders["bert"]), registry.get_model_info(str(folders["bert"])).default_spec)
    assert hf_folder.read_folder(str(folders["bert"])).stored == sum(
        t.numel() for t in built.state_dict().values())


def test_two_runs_differing_in_fine_tuning_say_so_in_words():
    from mpsstudio.engine.analysis.differences import differences
    from mpsstudio.engine.basics.results import RunResult

    a = RunResult(config=RunConfig(model="/m", dataset="synthetic", options={"finetune": "full"}))
    b = RunResult(config=RunConfig(model="/m", dataset="synthetic", options={"finetune": "lora", "lora_rank": 8}))
    [d] = differences(a, b)
    assert (d.label, d.base, d.other, d.words("other")) == ("fine-tuning", "full", "LoRA", "fine-tuning LoRA")


@pytest.mark.long
def test_the_trainer_example_keeps_the_cpus_run_on_the_cpu(folders, tmp_path, capsys):
    """examples/hf_trainer_finetune.py (transformers' Trainer, which picks an accelerator by itself) under `mpsstudio
    run --devices cpu`: its run trains on the CPU and is counted."""
    from pathlib import Path

    from mpsstudio import cli

    example = Path(__file__).resolve().parents[3] / "examples" / "hf_trainer_finetune.py"
    out = tmp_path / "trainer.json"
    code = cli.main(["run", str(example), "--devices", "cpu", "--warmup", "2", "--json", str(out), "--", "--model",
                     str(folders["gpt"]), "--steps", "12", "--batch-size", "4", "--seq-len", "16"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [run] = json.loads(out.read_text())["runs"]
    assert run["status"] == "finished" and run["config"]["device"] == "cpu"
    assert run["summary"]["measured_steps"] >= 5


def test_full_and_lora_runs_of_a_folder_are_named_apart_and_compared_as_fine_tuning(folders, capsys):
    """`history` showed full and LoRA runs of one folder as the same row and `--compare` never grouped them; full
    fine-tuning now says what trains, as LoRA does."""
    from mpsstudio.cli.bench import model_lines
    from mpsstudio.engine.analysis import contrast

    full = run(folders["gpt"], options={"finetune": "full"})
    lora = run(folders["gpt"], options={"finetune": "lora"})
    assert full.status == lora.status == "finished", (full.error, lora.error)
    assert full.config.model_label != lora.config.model_label and lora.config.model_label.endswith("· LoRA")
    [found] = [c for c in contrast.by_setting([full, lora]) if c.axis == "finetune"]
    assert {found.baseline.id, found.rows[0].run.id} == {full.id, lora.id}
    assert found.title().endswith(": fine-tuning compared")
    assert any(line.startswith("trains all ") and line.endswith("(full fine-tuning)") for line in model_lines(full))
    assert any("(LoRA)" in line for line in model_lines(lora))


def test_a_folders_json_baseline_is_the_same_work_as_its_runs(folders, tmp_path, capsys):
    """bench --json writes no absolute path (the folder is its name there); the regression check matches a model
    folder by its name, as it does a model file, so the folder's own baseline is never 'another setup'."""
    from mpsstudio import cli

    base = tmp_path / "base.json"
    args = ["bench", "--model", str(folders["gpt"]), "--dataset", "synthetic", "--devices", "cpu", "--steps", "4",
            "--warmup", "1", "--batch-size", "4", "--seq-len", "16", "--no-inspect"]
    assert cli.main([*args, "--json", str(base)]) == 0
    assert str(folders["gpt"]) not in base.read_text()
    code = cli.main([*args, "--baseline", str(base), "--repeat", "1"])
    out = capsys.readouterr()
    assert code in (cli.EXIT_OK, cli.EXIT_RUN_FAILED, cli.EXIT_CANNOT_TELL), out.err
    assert "another setup" not in out.err + out.out and "Regression check: cpu:" in out.out


def test_url_arguments_survive_a_shared_file():
    from mpsstudio.engine.basics.scrub import scrub

    text = "--db postgres://trainer@db.internal:5432/runs --data /home/someone/data/train.csv --url https://x.org/a/b"
    assert scrub(text, []) == "--db postgres://trainer@db.internal:5432/runs --data train.csv --url https://x.org/a/b"
