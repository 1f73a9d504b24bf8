"""RunRequest: what the user chose, before it is planned into runs.

Both front ends build one (the CLI from its arguments, the window from its setup form) and hand it to
`run/session.plan_request`, which turns it into one RunConfig per device x framework x environment x GPU count,
leaving out with a reason what cannot run here. Neither front end makes a RunConfig of its own: a rule of the plan
(several GPUs with several frameworks refused, MLX's TF32-class second run, ...) is then the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from .config import RunConfig

_OWN = ("devices", "frameworks", "gpus", "pythons", "rounds")
_CONFIG_FIELDS = frozenset(f.name for f in fields(RunConfig))


@dataclass(frozen=True)
class RunRequest:
    """The settings every run shares, and the axes the plan expands: `devices` (names such as "cpu", "mps",
    "cuda:1"), `frameworks` (() : the settings' own), `gpus` (() : one GPU a run; else the CUDA run once per
    count), `pythons` (() : the settings' own environment; else PyTorch's runs once per interpreter, None being
    MPS Studio's own) and `rounds` (each run that many times, interleaved)."""

    settings: RunConfig = field(default_factory=RunConfig)
    devices: tuple[str, ...] = ("cpu",)
    frameworks: tuple[str, ...] = ()
    gpus: tuple[int, ...] = ()
    pythons: tuple[str | None, ...] = ()
    rounds: int = 1

    def __post_init__(self):  # one form (tuples), so that a request is immutable and equal requests compare equal
        for name in ("devices", "frameworks", "gpus", "pythons"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value or ()))

    @classmethod
    def of(cls, base: RunConfig | None = None, **changes) -> "RunRequest":
        """A request from `base`'s settings (default: RunConfig's) with `changes`: the request's own fields
        (devices, frameworks, gpus, pythons, rounds) and any of RunConfig's."""
        return cls(settings=base if base is not None else RunConfig()).changed(**changes)

    def changed(self, **changes) -> "RunRequest":
        """A new request with these of its own fields (`settings` too: other settings) or of the settings' changed (the settings copied, never
        shared). TypeError for a name that is neither: a bug of the caller, not bad input."""
        base = changes.pop("settings", self.settings)
        unknown = set(changes) - set(_OWN) - _CONFIG_FIELDS
        if unknown:
            raise TypeError(f"RunRequest has no field {sorted(unknown)[0]!r}")
        own = {k: v for k, v in changes.items() if k in _OWN}
        settings = {k: v for k, v in changes.items() if k not in _OWN}
        return replace(self, settings=base.changed(**settings), **own)
