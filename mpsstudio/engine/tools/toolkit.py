"""What the measuring tools (max-batch, inspect) share with a run: the same checks, data, model and env.

Each tool runs in a run's own process (process.run_tool), so a user's model or a broken device never takes
the front end down, and it builds the model exactly as a run does: same seed, same input spec, same device
checks (the functional probe included), same environment record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..machine import devices, environment, host, precision, probe
from ..models import registry as models
from ..run import steps
from ..run.feed import Feed, feed_for
from ..run.setup import load_data
from ..data.batches import InputConverter
from ..basics.config import RunConfig
from ..data.datasets import LoadedDataset
from ..basics.errors import UserError
from ..basics.spec import DataSpec

# what inspect and diagnose say of a model fed by its file's make_batch or loss (run/feed.py): no parity is faked
NOT_FOR_OWN_FEED = ("Parity with the CPU in float64 was not checked: it compares one tensor of images or tokens and "
                    "cross-entropy on logits, and this model is fed by its file's make_batch or loss.")
NOT_FOR_FOLDER = ("Parity with the CPU in float64 was not checked: it compares one tensor of images or tokens and "
                  "cross-entropy on logits, and a Hugging Face folder's model takes its task's batch (token ids with "
                  "an attention mask and labels, or pixel values and labels) and computes its own loss in "
                  "transformers.")


def not_for_own_feed(model: str) -> str:
    """Why parity is not checked for a model that makes its own batches or loss, in the words of what it is."""
    from ..models.hf_folder import is_model_folder

    return NOT_FOR_FOLDER if is_model_folder(model) else NOT_FOR_OWN_FEED


class Stopped(Exception):
    """The user asked a tool to stop; it returns what it found so far."""


@dataclass
class Setup:
    config: RunConfig
    device: devices.Device
    tdev: torch.device
    data: LoadedDataset
    model_spec: DataSpec
    env: dict
    feed: Feed = field(default_factory=Feed)  # a model file's own make_batch and loss (run/feed.py)


def prepare(config: RunConfig, progress=None) -> Setup:
    """Check the config and the device (UserError: one sentence) and load the data, as a run's setup does."""
    cfg = config.check_runs_here()
    info = models.get_model_info(cfg.model)
    dev = devices.resolve_device(cfg.device)
    probe.require(dev)
    reason = precision.precision_unsupported_reason(dev, cfg.precision) if cfg.precision else None
    if reason:
        raise UserError(f"{cfg.precision} precision is not available on {dev.id}: {reason}.")
    data = load_data(cfg, progress)
    if data.spec.kind not in info.input_kind:
        raise UserError(f"{cfg.model} takes {info.input_kind} input but {data.name} holds {data.spec.kind}; "
                        f"pick another model or dataset.")
    return Setup(cfg, dev, torch.device(dev.torch_device or dev.id), data,
                 models.input_spec_for(cfg.model, data.spec), tool_env(dev), feed_for(cfg))


def tool_env(dev: devices.Device) -> dict:
    """The environment record of a run, for a tool's result."""
    env = environment.environment()
    env["device_name"] = dev.name
    env["machine_label"] = environment.machine_label(env)
    env["host"] = host.conditions()
    return env


def build(setup: Setup) -> torch.nn.Module:
    """The model as a run builds it (seeded), on the CPU; a user's model is first given one sample of its input
    (steps.check_forward: a model that cannot take it is one sentence naming the layer, as in a run)."""
    torch.manual_seed(setup.config.seed)
    model = models.build_model(setup.config.model, setup.model_spec, setup.config.options)
    if setup.config.model.strip().lower() not in {m.name for m in models.list_models()}:
        x, _ = synthetic_batch(setup.model_spec, 2, torch.device("cpu"), setup.config.seed, setup.feed)
        steps.check_forward(model, x, setup.config, setup.feed.made, setup.model_spec.num_classes)
    return model


def real_batch(setup: Setup, n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `n` training samples (repeated when the set is smaller), shaped and normalised as a run's are; a
    model file's own make_batch makes them where the file has one."""
    if setup.feed.made:
        return setup.feed.batch(n, device, setup.config.seed)
    train = setup.data.train
    count = setup.data.train_count
    if count < 1:
        raise UserError(f"{setup.data.name} has no training samples.")
    items = [train[i % count] for i in range(n)]
    x = torch.stack([torch.as_tensor(item[0]) for item in items])
    y = torch.as_tensor([int(item[1]) for item in items], dtype=torch.long)
    convert = InputConverter(setup.data.spec, setup.model_spec, setup.data.mean, setup.data.std, device)
    return convert(x.to(device)), y.to(device)


def feed_at(setup: Setup, spec: DataSpec) -> Feed:
    """The setup's feed for token input of `spec`'s length: a model folder's batches remade at it; a model fed by
    its dataset's tensors as it is; UserError for a model file's own make_batch, which decides its own length."""
    from ..models.hf_folder import is_model_folder

    if is_model_folder(setup.config.model):
        from ..models import hf_model

        folder, _ = hf_model.spec_for(setup.config.model, None)
        return Feed(hf_model.batch_maker(folder, spec), hf_model.model_loss, folder.path.name)
    if setup.feed.made:
        raise UserError(f"{setup.config.model} makes its own batches (make_batch), so their length is its own; "
                        "search the largest batch instead.")
    return setup.feed


def positions(setup: Setup) -> int | None:
    """The most positions a token model takes (a model folder's config says; None where nothing says)."""
    from ..models.hf_folder import is_model_folder, read_folder

    if is_model_folder(setup.config.model):
        return read_folder(setup.config.model).max_positions or None
    return None


def synthetic_batch(spec: DataSpec, n: int, device: torch.device, seed: int = 0,
                    feed: Feed | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch shaped like the model's input (normalised images or token ids), made on the device; a model file's
    own make_batch makes it where the file has one."""
    if feed is not None and feed.made:
        return feed.batch(n, device, seed)
    gen = torch.Generator().manual_seed(seed)
    if spec.kind == "image":
        x = torch.randn((n, *spec.sample_shape), generator=gen)
    else:
        x = torch.randint(0, max(1, spec.vocab_size), (n, *spec.sample_shape), generator=gen)
    y = torch.randint(0, spec.num_classes, (n,), generator=gen)
    return x.to(device), y.to(device)
