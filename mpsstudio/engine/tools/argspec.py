"""A tool's options, declared once: each `Option` is one command-line argument of its subcommand (the CLI adds it
as declared: cli/arguments.add_options) and, when it has a `Field`, the field of the window's sheet that sets the
same thing (gui/tools/sheet.py builds the field from it). The rows of registry.TABLE carry them, in the order both
front ends show them.

A value a field needs from the setup (its first value, its choices, its range) is a `Ref`: "module:name" under
engine/tools, imported when the sheet opens, a constant as it is or a function called with the sheet's `Context`.
Torch-free, like the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..basics.config import RunConfig


@dataclass(frozen=True)
class Context:
    """What a sheet opens on: the setup's config, the devices checked, the runs so far (for an estimate), the
    training samples of the dataset (None: not known) and, for export, the selected run's model (words, weights
    file, its config)."""

    config: RunConfig
    devices: Sequence[str] = ()
    runs: Sequence[Any] = ()
    train: int | None = None
    trained: tuple[str, str, RunConfig] | None = None


@dataclass(frozen=True)
class Ref:
    """A value of a tool's module, found when it is needed: "sweep:DEFAULT_STEPS", or "maxbatch_sheet:cap" (a function
    of the Context). Relative to engine/tools ("..basics.config:MAX_BATCH" reaches further)."""

    target: str

    def value(self, context: Context) -> Any:
        module, _, name = self.target.partition(":")
        found = getattr(importlib.import_module(module if module.startswith(".") else f".{module}", __package__),
                        name)
        return found(context) if callable(found) else found


def value_of(value: Any, context: Context) -> Any:
    """`value` as it is, or what the Ref it is gives."""
    return value.value(context) if isinstance(value, Ref) else value


@dataclass(frozen=True)
class Field:
    """How the window's sheet shows an option. `kind`:
    - "whole" (a spin box from `low` to `high`), "minutes" (a spin box of tenths, `suffix` after it),
    - "text" (a line, `placeholder` when empty), "choice" (a menu of `items`, (value, words) each),
    - "check" (one box, `text` beside it), "checks" (a box for each of `items`; `inline`: on one row).
    `initial` is the value the field opens with; `enabled_when` (name, value): usable only while that field has it
    (off, the field gives None)."""

    label: str
    kind: str
    tip: str = ""
    initial: Any = None
    low: Any = 0
    high: Any = 0
    items: Any = ()
    text: str = ""
    placeholder: str = ""
    suffix: str = ""
    inline: bool = False
    enabled_when: tuple[str, Any] | None = None
    note: Ref | None = None  # a line under the field, when the function gives one


@dataclass(frozen=True)
class Option:
    """One command-line argument, as argparse takes it (`type` int, float or None for text; `action` store_true or
    store_false; `hidden`: accepted, not in --help), and the sheet's field for it (None: the command line only)."""

    flag: str
    help: str
    type: Any = None
    default: Any = None
    dest: str = ""
    metavar: str | tuple[str, ...] | None = None
    choices: Sequence[str] | None = None
    action: str | None = None
    required: bool = False
    hidden: bool = False
    field: Field | None = None

    @property
    def name(self) -> str:
        """The value's name: argparse's dest, and the key of the sheet's values."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")


DEVICES = Option("--devices", "comma-separated devices (default: every available device)")  # the tools' own
