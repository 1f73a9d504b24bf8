"""A user's own model: a .py file that defines ``build_model(num_classes, input_shape)``.

Loading the file runs its code, so front ends show ``user_model_warning(path)`` before using one.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ..basics.config import MAX_CHANNELS, MAX_CLASSES, MAX_SEQ, MAX_SIDE
from ..basics.errors import UserError
from ..basics.formatting import error_line, printable
from ..basics.spec import DataSpec

USER_MODEL_WARNING = "Loading {path} runs the Python code in it; only use files you trust."

_module_counter = itertools.count()


def user_model_warning(path: str) -> str:
    """The warning a front end prints once before loading the user's model file at ``path``."""
    return USER_MODEL_WARNING.format(path=path)


def user_model_path(name: str, unknown: Callable[[str], UserError], what: str = "Model file",
                    holds: str = "a Python file that defines build_model") -> Path:
    """The user's model file (or script: `what`, `holds`) named by ``name``, or a UserError saying why it cannot be
    one (`unknown(name)` when the name is neither a built-in model nor a .py file)."""
    path = Path(name).expanduser()
    if path.suffix.lower() != ".py":
        if path.is_file():
            raise UserError(f"{what} '{printable(name)}' is not a .py file; give {holds}.")
        raise unknown(name)
    if not path.exists():
        raise UserError(f"{what} '{printable(name)}' was not found; check the path.")
    if not path.is_file():
        raise UserError(f"{what} '{printable(name)}' is not a file; give the path to a .py file.")
    return path


@dataclass(frozen=True)
class Declared:
    """What a model file says about its input, read without running it (the front end reads it too):
    `INPUT_SHAPE = (3, 224, 224)` (or `(seq_len,)` for tokens), `NUM_CLASSES = 1000`, `VOCAB_SIZE = 30522`, and
    whether it defines `make_batch(batch_size, generator)` (its own inputs and targets) and `loss(outputs,
    targets)` (its own loss, else cross-entropy on logits)."""

    input_shape: tuple[int, ...] | None = None
    num_classes: int | None = None
    vocab_size: int | None = None
    make_batch: bool = False
    loss: bool = False




def declared(path: Path) -> Declared:
    """The file's declarations, from its syntax tree (nothing in it runs); UserError naming what is wrong with one."""
    import ast

    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, ValueError, SyntaxError) as exc:
        raise UserError(f"Model file '{path}' cannot be read ({error_line(exc, 200)}); fix the file and try "
                        "again.") from None
    found: dict = {}
    functions = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.add(node.name)
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("INPUT_SHAPE", "NUM_CLASSES", "VOCAB_SIZE"):
                try:
                    found[target.id] = ast.literal_eval(value) if value is not None else None
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    raise UserError(f"{target.id} in '{path.name}' must be written out as numbers (e.g. "
                                    f"{EXAMPLES[target.id]}), not computed; MPS Studio reads it without running the "
                                    "file.") from None
    shape = found.get("INPUT_SHAPE")
    if shape is not None:
        shape = check_shape(shape, f"INPUT_SHAPE in '{path.name}'")
    return Declared(shape, _count(found.get("NUM_CLASSES"), f"NUM_CLASSES in '{path.name}'", MAX_CLASSES, low=2),
                    _count(found.get("VOCAB_SIZE"), f"VOCAB_SIZE in '{path.name}'", 2**31),
                    "make_batch" in functions, "loss" in functions)


def check_shape(shape, what: str) -> tuple[int, ...]:
    """(C, H, W) of an image or (L,) of a token sequence, whole numbers in range; UserError otherwise."""
    ok = isinstance(shape, (tuple, list)) and len(shape) in (1, 3) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in shape)
    bounds = (MAX_SEQ,) if ok and len(shape) == 1 else (MAX_CHANNELS, MAX_SIDE, MAX_SIDE)
    if not ok or not all(1 <= v <= top for v, top in zip(shape, bounds)):
        raise UserError(f"{what} must be (channels, height, width) for images or (length,) for tokens, whole "
                        f"numbers from 1 (at most {MAX_CHANNELS:,} channels, {MAX_SIDE:,} pixels a side, "
                        f"{MAX_SEQ:,} tokens), not {printable(repr(shape))[:40]}.")
    return tuple(shape)


EXAMPLES = {"INPUT_SHAPE": "INPUT_SHAPE = (3, 224, 224)", "NUM_CLASSES": "NUM_CLASSES = 1000",
            "VOCAB_SIZE": "VOCAB_SIZE = 30522"}


def _count(value, what: str, top: int, low: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
        shown = printable(repr(value))[:40]  # quoted: NUM_CLASSES = "7" is a text, not the number 7
        raise UserError(f"{what} must be a whole number from {low} to {top:,} (e.g. {EXAMPLES[what.split()[0]]}), "
                        f"not {shown}.")
    return value


def _load_user_module(path: Path) -> object:
    """Import the user's file under a fresh, unique module name (so edits are picked up each time)."""
    module_name = f"mpsstudio_user_model_{next(_module_counter)}"
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ folder left in the user's folder (nor beside what it imports)
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"'{path.name}' cannot be imported as a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module  # dataclasses and pickling look the module up here
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        sys.modules.pop(module_name, None)
        raise UserError(f"Model file '{path}' failed to load ({error_line(error, 200)}); fix the file and try again.") from error
    finally:
        sys.dont_write_bytecode = writes
    return module


_loaded: dict = {}  # (path, mtime, size) -> the module, in this process (a run's own process loads it once)


def user_module(path: Path) -> object:
    """The user's file imported once per process and version of the file (its build_model, make_batch and loss
    share one module); an edited file is imported again."""
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and key in _loaded:
        return _loaded[key]
    module = _load_user_module(path)
    if key is not None:
        _loaded.clear()  # one version of one file at a time: a process measures one model
        _loaded[key] = module
    return module


def user_function(path: Path, name: str) -> Callable | None:
    """The file's `make_batch` or `loss`, or None where it defines none."""
    found = getattr(user_module(path), name, None)
    return found if callable(found) else None


def build_user_model(path: Path, spec: DataSpec) -> nn.Module:
    """Run the user's build_model(num_classes, input_shape) and check it returned a module."""
    module = user_module(path)
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
