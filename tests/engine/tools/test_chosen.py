"""A tool's options are declared once (registry.TABLE): the CLI's arguments and the sheet's fields come from the
same rows, and what a sheet gathers becomes a tool's settings in the engine, tested here without Qt."""

from __future__ import annotations

import pytest

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.tools import chosen, maxbatch, registry, sweep, tune
from mpsstudio.engine.tools.argspec import Context, value_of

CONFIG = RunConfig(model="mnist_cnn", dataset="synthetic", device="cpu", batch_size=64)


def opened(kind: str, context: Context) -> dict:
    """The values a sheet opens with: each field's first value, as the widget would give it back."""
    values = {}
    for option in registry.TOOLS[kind].options:
        f = option.field
        if f is None:
            continue
        initial = value_of(f.initial, context)
        if f.kind == "choice":
            items = value_of(f.items, context)
            initial = initial if initial is not None else items[0][0]
            assert initial in [value for value, _ in items], (kind, option.flag)
        elif f.kind in ("whole", "minutes"):
            assert value_of(f.low, context) <= initial <= value_of(f.high, context), (kind, option.flag)
        elif f.kind == "checks":
            initial = list(initial)
        values[option.name] = initial
    return values


def test_what_the_table_repeats_of_tunes_choices_is_equal_to_them():
    assert registry.BOTH == tune.BOTH


@pytest.mark.parametrize("kind", [t.name for t in registry.TABLE if t.chosen])
def test_each_sheet_opens_on_values_its_tool_takes(kind):
    context = Context(CONFIG, ("cpu", "mps"), (), 1024,
                      ("mlp on cpu (shapes)", "w.pt", RunConfig(model="mlp", dataset="shapes")))
    tool = registry.TOOLS[kind]
    picked = tool.call("chosen", opened(kind, context), context)
    assert set(picked) == {"config", "batch_sizes", "payload"} and isinstance(picked["payload"], dict)
    assert isinstance(picked["config"], RunConfig)
    if tool.plan:
        assert tool.call("plan", picked, context)


def test_the_sheets_first_values_are_the_command_lines_defaults():
    context = Context(CONFIG, ("cpu",), (), None)
    s = chosen.sweep_chosen(opened("sweep", context), context)
    assert s["batch_sizes"] == sweep.default_batch_sizes()
    assert s["payload"] == {"steps": sweep.DEFAULT_STEPS, "warmup": sweep.DEFAULT_WARMUP}
    m = chosen.max_batch_chosen(opened("max-batch", context), context)["payload"]
    assert m == {"memory_limit": None, "cap": maxbatch.DEFAULT_CAP}
    t = chosen.tune_chosen(opened("tune", context), context)["payload"]
    assert t["budget_s"] == tune.DEFAULT_BUDGET_MIN * 60 and t["steps"] == tune.DEFAULT_STEPS
    assert t["batch_sizes"] == tune.default_batch_sizes(64, None) and t["precisions"] == ["fp32", "bf16", "fp16"]
    e = chosen.export_chosen(opened("export", context), context)
    assert e["payload"] == {"format": "coreml", "precision": "fp32", "compress": None, "weights": None}
    assert e["config"] is CONFIG  # no trained run: the model as built, said in the plan
    assert chosen.export_plan(e, context).startswith("Untrained")


def test_a_small_training_set_caps_the_search_and_says_so():
    context = Context(CONFIG, ("cpu",), (), 54)
    assert chosen.max_batch_cap(context) == 54 and "54 training samples" in chosen.max_batch_note(context)
    picked = chosen.max_batch_chosen({"memory_limit": " 1.5G ", "max_batch": 54}, context)
    assert picked["payload"] == {"memory_limit": 3 * 2**29, "cap": 54}
    assert "the 54 training samples" in chosen.max_batch_plan(picked, context)
    assert chosen.max_batch_note(Context(CONFIG)) == ""


def test_the_trained_run_gives_its_weights_and_its_config():
    run_config = RunConfig(model="mlp", dataset="shapes", batch_size=8)
    context = Context(CONFIG, ("cpu",), (), None, ("mlp on cpu (shapes)", "w.pt", run_config))
    assert [v for v, _ in chosen.export_sources(context)] == ["trained", "fresh"]
    values = {"weights": "trained", "format": "torchscript", "precision": "fp32", "compress": None}
    picked = chosen.export_chosen(values, context)
    assert picked["config"] is run_config and picked["payload"]["weights"] == "w.pt"


@pytest.mark.parametrize("kind, values, said", [
    ("sweep", {"batch_sizes": "1, a", "steps": 24, "warmup": 3}, "Batch sizes must be whole numbers"),
    ("max-batch", {"memory_limit": "lots", "max_batch": 8}, "The memory limit must be a size such as 8G"),
    ("deploy-bench", {"batch_sizes": "0", "compress": []}, "Batch sizes must be whole numbers"),
    ("tune", {"batch_sizes": "", "precisions": [], "try_channels_last": "off", "try_compile": "off", "budget": 1.0,
              "steps": 4}, "Choose at least one precision to try."),
    ("tune", {"batch_sizes": "64", "precisions": ["fp32"], "try_channels_last": "off", "try_compile": "off",
              "budget": 0.01, "steps": 4}, "--budget is minutes"),
])
def test_a_value_the_engine_refuses_is_one_sentence(kind, values, said):
    with pytest.raises(UserError, match=said[:20]):
        registry.TOOLS[kind].call("chosen", values, Context(CONFIG, ("cpu",)))


def test_each_option_is_the_clis_argument():
    from mpsstudio.cli.parser import build_parser

    parser = build_parser()
    for tool in registry.TABLE:
        if not tool.help:
            continue
        sub = parser._subparsers._group_actions[0].choices[tool.name]  # argparse keeps them there
        flags = {flag: action for action in sub._actions for flag in action.option_strings}
        for option in tool.options:
            action = flags[option.flag]
            assert action.dest == option.name and (option.choices is None or
                                                   list(action.choices) == list(option.choices)), option.flag


def test_the_check_sheet_adds_the_setup_s_model_only_when_its_box_is_ticked():
    context = Context(CONFIG, ("cpu",), (), None)
    values = opened("check", context)
    assert values["model"] is False
    plain = chosen.check_chosen(values, context)
    assert "config" not in plain["payload"] and "mnist_cnn" not in chosen.check_plan(plain, context)
    ticked = chosen.check_chosen({**values, "model": True}, context)
    assert RunConfig.from_dict(ticked["payload"]["config"]).model == "mnist_cnn"
    assert "each operation of the suite, and mnist_cnn as a whole against" in chosen.check_plan(ticked, context)
