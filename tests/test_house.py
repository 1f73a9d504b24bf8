"""The house's rules that no linter sees: the front ends plan through the engine, the docs' map is true."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mpsstudio"


def _constructions(source: str) -> list[str]:
    """Where a module makes a RunConfig of its own: RunConfig(...), dataclasses.replace, .with_device(...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "dataclasses" and \
                any(a.name == "replace" for a in node.names):
            found.append(f"line {node.lineno}: imports dataclasses.replace")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "RunConfig":
                found.append(f"line {node.lineno}: RunConfig(...)")
            if isinstance(func, ast.Attribute) and func.attr == "with_device":
                found.append(f"line {node.lineno}: .with_device(...)")
    return found


def test_the_window_constructs_no_run_config():
    """The window builds a RunRequest and the engine plans it (run/session.plan_request), as the CLI does."""
    offenders = {str(path.relative_to(PACKAGE)): found for path in sorted((PACKAGE / "gui").rglob("*.py"))
                 if (found := _constructions(path.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_construction_check_finds_each_kind():
    source = ("from dataclasses import replace\n"
              "a = RunConfig(model='mlp')\n"
              "b = a.with_device('cpu')\n")
    assert _constructions(source) == ["line 1: imports dataclasses.replace", "line 2: RunConfig(...)",
                                      "line 3: .with_device(...)"]


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _without_parentheses(text: str) -> str:
    out, depth = [], 0
    for char in text:
        depth += char == "("
        if not depth:
            out.append(char)
        depth -= char == ")" and depth > 0
    return "".join(out)


def map_entries(text: str) -> dict[str, list[str]]:
    """The map's packages and the names under each (modules, and subpackages ending in /): the first code block
    after "## The map", a package path opening a line, its names after it (descriptions in parentheses)."""
    block = text.split("## The map", 1)[1].split("```", 2)[1]
    entries: dict[str, list[str]] = {}
    current = None
    for line in _without_parentheses(block).splitlines():
        words = [w for w in line.replace(",", " ").replace(";", " ").split() if w]
        if words and words[0].startswith("mpsstudio/"):
            current = words.pop(0)
            entries.setdefault(current, [])
        if current is not None:
            entries[current] += words
    return entries


def test_the_architecture_map_names_every_module_and_only_modules_that_exist():
    root = PACKAGE.parent
    entries = map_entries(ARCHITECTURE.read_text(encoding="utf-8"))
    wrong, missing = [], []
    for package, names in entries.items():
        folder = root / package
        for name in names:
            target = folder / name if name.endswith("/") else folder / f"{name}.py"
            if not (target.is_dir() if name.endswith("/") else target.is_file()):
                wrong.append(f"{package}{name}")
    packages = [PACKAGE, *(p for p in PACKAGE.rglob("*") if (p / "__init__.py").is_file())]  # data folders aside
    for folder in packages:
        package = str(folder.relative_to(root)) + "/"
        named = entries.get(package)
        if named is None:
            missing.append(package)
            continue
        for path in folder.iterdir():
            name = path.name + "/" if path.is_dir() else path.stem
            if path.name == "__init__.py" or not (path in packages or path.suffix == ".py"):
                continue
            if name not in named:
                missing.append(f"{package}{name}")
    assert wrong == [] and missing == [], "docs/architecture.md's map: fix the names, or add the new modules"


def test_the_map_reader_reads_names_and_leaves_descriptions():
    text = ("## The map\n```\nmpsstudio/run/  session (plan, data), trainer (a (nested) note);\n"
            "                 steps\n```\n")
    assert map_entries(text) == {"mpsstudio/run/": ["session", "trainer", "steps"]}


def test_a_tool_is_its_module_and_one_row_of_the_table():
    """The registry and the sheet dispatch through its table, never on names; every row's functions exist; every
    stored kind has its declared record, a CLI command (its options from its row), a sheet and a title."""
    from mpsstudio.cli import COMMANDS
    from mpsstudio.engine.tools import registry
    from mpsstudio.engine.tools.records import SHAPES

    for path in ("engine/tools/registry.py", "cli/parser.py"):
        tree = ast.parse((PACKAGE / path).read_text(encoding="utf-8"))
        compares = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
                    and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)
                    and any(isinstance(c, ast.Constant) and isinstance(c.value, str) for c in node.comparators)]
        assert compares == [], path  # no `if name == "max-batch"`
    sheet = (PACKAGE / "gui" / "tools" / "sheet.py").read_text(encoding="utf-8")
    sheet = sheet.replace('field.kind == "check"', "")  # a checkbox field's kind (argspec.Field), not the check tool
    assert not [t.name for t in registry.TABLE if f'"{t.name}"' in sheet]
    for tool in registry.TABLE:
        assert bool(tool.help) == bool(tool.chosen) == tool.stored, tool.name  # a subcommand and a sheet each
        for which in ("run", "ended", "rederived", "chosen", "plan", "section", "arguments", "failed", "subject", "since"):
            target = getattr(tool, which)
            if target:
                module, _, function = target.partition(":")
                source = (PACKAGE / "engine" / "tools" / (module.replace(".", "/") + ".py"))
                source = source if source.is_file() else source.with_suffix("") / "__init__.py"
                assert f"def {function}(" in source.read_text(encoding="utf-8"), (tool.name, which)
    assert set(SHAPES) == {t.name for t in registry.TABLE if t.stored or t.run}
    assert set(registry.STORED) <= set(COMMANDS)
    assert {t.name for t in registry.TABLE if t.menu} == set(registry.STORED)  # each in the window's Tools menu
