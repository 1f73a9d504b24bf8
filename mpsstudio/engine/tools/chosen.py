"""What a tool's sheet gathered, as the tool takes it: each tool's row in registry.TABLE names its `chosen` function
here (the sheet's values by option name, and the sheet's Context -> {"config", "batch_sizes", "payload"} for
start_tool; UserError, one sentence, for a value the engine refuses) and its `plan` (the line that says what it will
do), and the values its fields open with. Torch-free: the window opens a sheet without loading torch."""

from __future__ import annotations

from ..basics.errors import UserError
from . import maxbatch_answer, sweep, toolview, tune
from .argspec import Context
from .maxbatch_answer import DEFAULT_CAP

FORMAT_TITLES = (("coreml", "Core ML package (.mlpackage)"), ("torchscript", "TorchScript (.pt)"),
                 ("exported-program", "torch.export program (.pt2)"))


def chosen(context: Context, payload: dict, config=None, batch_sizes: list[int] | None = None) -> dict:
    return {"config": config if config is not None else context.config, "batch_sizes": batch_sizes,
            "payload": payload}


# -- sweep -------------------------------------------------------------------------------------------------
def sweep_sizes_text(_context: Context) -> str:
    return ", ".join(str(b) for b in sweep.default_batch_sizes())


def sweep_chosen(values: dict, context: Context) -> dict:
    sizes = sweep.parse_batch_sizes(values["batch_sizes"]) or sweep.default_batch_sizes()
    return chosen(context, {"steps": values["steps"], "warmup": values["warmup"]}, batch_sizes=sizes)


def sweep_plan(picked: dict, context: Context) -> str:
    p = picked["payload"]
    return toolview.sweep_line(context.config, context.devices, picked["batch_sizes"], p["steps"], p["warmup"],
                               context.runs)


# -- max-batch ---------------------------------------------------------------------------------------------


def max_batch_cap(context: Context) -> int:
    return min(DEFAULT_CAP, context.train) if context.train else DEFAULT_CAP


def max_batch_note(context: Context) -> str:
    if context.train and context.train < DEFAULT_CAP:
        return f"At most the {context.train:,} training samples: a run's batch is never larger."
    return ""


def max_batch_chosen(values: dict, context: Context) -> dict:
    """The sheet's fields read as the command line's are (maxbatch_answer.arguments), the memory limit in words."""
    from ..basics.formatting import parse_memory_size

    text = values["memory_limit"].strip()
    at = values.get("at_batch") if values.get("longest_sequence") else None  # (the sheet's field is off then)
    payload = maxbatch_answer.arguments({**values, "memory_limit": None, "at_batch": at})
    return chosen(context, {**payload, "memory_limit": parse_memory_size(text) if text else None})


def max_batch_plan(picked: dict, context: Context) -> str:
    payload = picked["payload"]
    cap = payload["cap"]
    if payload.get("axis") == "seq_len":
        return toolview.max_batch_line(cap, "", axis="seq_len", at=payload["at"])
    source = f"the {context.train:,} training samples" if context.train and cap >= context.train else ""
    return toolview.max_batch_line(cap, source)


# -- inspect -----------------------------------------------------------------------------------------------
def setup_batch(context: Context) -> int:
    return context.config.batch


def inspect_chosen(values: dict, context: Context) -> dict:
    from ..basics.request import RunRequest

    return chosen(context, {}, config=RunRequest.of(context.config, batch_size=values["batch_size"]).settings)


# -- diagnose ----------------------------------------------------------------------------------------------
def diagnose_chosen(values: dict, context: Context) -> dict:
    return chosen(context, {"layers": values["layers"], "after_steps": values["after_steps"]})


# -- deploy-bench ------------------------------------------------------------------------------------------
def deploy_chosen(values: dict, context: Context) -> dict:
    return chosen(context, {"batch_sizes": sweep.parse_batch_sizes(values["batch_sizes"]) or [1, 8, 32],
                            "compress": values["compress"]})


# -- tune --------------------------------------------------------------------------------------------------
def tune_sizes_text(context: Context) -> str:
    return ", ".join(str(b) for b in tune.default_batch_sizes(context.config.batch, context.train))


def tune_chosen(values: dict, context: Context) -> dict:
    if not values["precisions"]:
        raise UserError("Choose at least one precision to try.")
    sizes = (sweep.parse_batch_sizes(values["batch_sizes"])
             or tune.default_batch_sizes(context.config.batch, context.train))
    return chosen(context, {"batch_sizes": sizes, "precisions": values["precisions"],
                            "channels_last": values["try_channels_last"], "compile": values["try_compile"],
                            "budget_s": tune.parse_budget(values["budget"]), "steps": values["steps"]})


def tune_plan(picked: dict, context: Context) -> str:
    p = picked["payload"]
    per_device = (len(p["batch_sizes"]) * len(p["precisions"]) * (2 if p["channels_last"] == "both" else 1)
                  * (2 if p["compile"] == "both" else 1))
    return (f"Up to {per_device} candidates on each of {', '.join(context.devices)} (and your current settings), in "
            f"rounds within {p['budget_s'] / 60:g} minutes; after three rounds each, the clearly slower are dropped.")


# -- export ------------------------------------------------------------------------------------------------
def export_sources(context: Context) -> tuple[tuple[str, str], ...]:
    """What is exported: the selected run's trained weights (when it saved them), or the model as built."""
    fresh = ("fresh", "The model as freshly built (random weights)")
    if context.trained is None:
        return (fresh,)
    return (("trained", f"Trained weights of {context.trained[0]}"), fresh)


def export_chosen(values: dict, context: Context) -> dict:
    trained = context.trained if values["weights"] == "trained" else None
    payload = {"format": values["format"], "precision": values["precision"], "compress": values["compress"],
               "weights": trained[1] if trained is not None else None}
    return chosen(context, payload, config=trained[2] if trained is not None else None)


def export_plan(picked: dict, _context: Context) -> str:
    if picked["payload"]["weights"]:
        return "Trained weights: the run's model as it ended training."
    return "Untrained: random weights, for testing the conversion (said in the result)."


# -- check -------------------------------------------------------------------------------------------------
def check_chosen(values: dict, context: Context) -> dict:
    model = {"config": context.config.to_dict()} if values.get("model") else {}  # the setup's model as a whole
    return chosen(context, {"devices": list(context.devices), "processes": values["processes"], **model})


def check_plan(picked: dict, _context: Context) -> str:
    devices = ", ".join(picked["payload"]["devices"]) or "every available device"
    n = picked["payload"]["processes"]
    timing = (f", then times matrix products in {n} fresh process{'es' if n != 1 else ''} each" if n
              else "; no timing across processes")
    model = picked["payload"].get("config")
    whole = f", and {model['model']} as a whole" if model else ""
    return (f"Checks {devices}: each operation of the suite{whole} against a float64 CPU reference, fresh, after a "
            f"large allocation, after emptying the cache and repeated{timing}.")
