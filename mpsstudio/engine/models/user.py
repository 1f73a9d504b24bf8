"""A user's own model: a .py file that defines ``build_model(num_classes, input_shape)``.

Loading the file runs its code, so front ends show ``user_model_warning(path)`` before using one.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Callable
from pathlib import Path

from torch import nn

from ..basics.errors import UserError
from ..basics.formatting import error_line
from ..basics.spec import DataSpec

USER_MODEL_WARNING = "Loading {path} runs the Python code in it; only use files you trust."

_module_counter = itertools.count()


def user_model_warning(path: str) -> str:
    """The warning a front end prints once before loading the user's model file at ``path``."""
    return USER_MODEL_WARNING.format(path=path)


def user_model_path(name: str, unknown: Callable[[str], UserError]) -> Path:
    """The user's model file named by ``name``, or a UserError saying why it cannot be one
    (`unknown(name)` when the name is neither a built-in model nor a .py file)."""
    path = Path(name).expanduser()
    if path.suffix.lower() != ".py":
        if path.is_file():
            raise UserError(f"Model file '{name}' is not a .py file; give a Python file that defines build_model.")
        raise unknown(name)
    if not path.exists():
        raise UserError(f"Model file '{name}' was not found; check the path.")
    if not path.is_file():
        raise UserError(f"Model file '{name}' is not a file; give the path to a .py file.")
    return path


def _load_user_module(path: Path) -> object:
    """Import the user's file under a fresh, unique module name (so edits are picked up each time)."""
    module_name = f"mpsstudio_user_model_{next(_module_counter)}"
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ folder left in the user's folder (nor beside what it imports)
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module  # dataclasses and pickling look the module up here
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        sys.modules.pop(module_name, None)
        raise UserError(f"Model file '{path}' failed to load ({error_line(error, 200)}); fix the file and try again.") from error
    finally:
        sys.dont_write_bytecode = writes
    return module


def build_user_model(path: Path, spec: DataSpec) -> nn.Module:
    """Run the user's build_model(num_classes, input_shape) and check it returned a module."""
    module = _load_user_module(path)
    build = getattr(module, "build_model", None)
    if not callable(build):
        raise UserError(
            f"Model file '{path}' has no build_model(num_classes, input_shape) function; "
            "define one that returns a torch.nn.Module."
        )
    try:
        model = build(spec.num_classes, spec.sample_shape)
    except (Exception, SystemExit) as error:
        raise UserError(f"build_model in '{path}' raised {error_line(error, 200)}; fix the function and try again.") from error
    if not isinstance(model, nn.Module):
        raise UserError(
            f"build_model in '{path}' returned {type(model).__name__}, not a torch.nn.Module; return the model."
        )
    return model
