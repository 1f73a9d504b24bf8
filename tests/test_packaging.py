"""The .app packaging, checked without building: spec and Info.plist values, icons, resources, frozen startup."""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import struct
import sys
from importlib import resources
from pathlib import Path

import platformdirs
import pytest

import mpsstudio
from mpsstudio import frozen
from tests.support.paths import ROOT

PACKAGING = ROOT / "packaging"
ICON_SIZES = (16, 32, 64, 128, 256, 512, 1024)


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def info_plist():
    return _load("mpsstudio_info_plist", PACKAGING / "info_plist.py")


def test_plist_values(info_plist):
    plist = info_plist.info_plist()
    assert info_plist.package_version() == mpsstudio.__version__
    assert plist["CFBundleShortVersionString"] == plist["CFBundleVersion"] == mpsstudio.__version__
    from mpsstudio.engine.machine.apple import macos_text, mps_min_macos, pinned_torch

    pinned = pinned_torch((ROOT / "constraints.txt").read_text())  # the torch the bundle carries
    assert plist["LSMinimumSystemVersion"] == macos_text(mps_min_macos(pinned)) == "14.0"
    assert plist["NSHighResolutionCapable"] is True
    assert plist["NSRequiresAquaSystemAppearance"] is False
    assert plist["CFBundleIdentifier"] == info_plist.BUNDLE_IDENTIFIER == "org.mpsstudio.MPSStudio"
    assert plist["CFBundleDisplayName"] == "MPS Studio"
    assert plist["LSApplicationCategoryType"] == "public.app-category.developer-tools"
    (folder,) = plist["CFBundleDocumentTypes"]
    assert folder["LSItemContentTypes"] == ["public.folder"] and folder["CFBundleTypeRole"] == "Viewer"
    import plistlib

    plistlib.loads(plistlib.dumps(plist))  # every value is plist-serialisable


def test_spec_uses_the_plist_module_and_the_required_pieces():
    spec = (PACKAGING / "mpsstudio.spec").read_text()
    assert "import info_plist" in spec
    assert "info_plist=info_plist.info_plist()" in spec
    assert "version=info_plist.package_version()" in spec
    assert "bundle_identifier=info_plist.BUNDLE_IDENTIFIER" in spec
    assert "name=info_plist.BUNDLE_NAME" in spec
    assert re.search(r"console=False", spec)
    assert "exclude_binaries=True" in spec  # onedir
    assert 'RES / "icon.icns"' in spec and 'ROOT / "mpsstudio" / "resources"' in spec
    assert '"torchvision")' in spec  # torchvision's compiled ops listed as binaries
    for name in ("tkinter", "matplotlib", "tests", "PySide6.QtWebEngineCore", "PySide6.QtQml"):
        assert f'"{name}"' in spec
    launcher = (PACKAGING / "launcher.py").read_text()
    assert "from mpsstudio.frozen import main" in launcher


def test_packaging_requirements_pin_pyinstaller():
    lines = (PACKAGING / "requirements.txt").read_text().splitlines()
    assert any(re.fullmatch(r"pyinstaller==[\d.]+", line.strip()) for line in lines)


def test_png_icons_have_their_sizes():
    from PIL import Image

    folder = resources.files("mpsstudio.resources") / "icons"
    for size in ICON_SIZES:
        data = (folder / f"icon-{size}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        image = Image.open(io.BytesIO(data))
        assert image.size == (size, size) and image.mode == "RGBA"
        assert image.getextrema()[3][1] == 255  # not fully transparent


def test_icns_container_parses():
    data = (resources.files("mpsstudio.resources") / "icon.icns").read_bytes()
    assert data[:4] == b"icns"
    assert struct.unpack(">I", data[4:8])[0] == len(data)
    entries, offset = {}, 8
    while offset < len(data):
        kind, length = data[offset:offset + 4], struct.unpack(">I", data[offset + 4:offset + 8])[0]
        assert length >= 8 and offset + length <= len(data)
        entries[kind] = data[offset + 8:offset + length]
        offset += length
    assert offset == len(data)
    from PIL import Image

    expected = {b"ic11": 32, b"ic12": 64, b"ic07": 128, b"ic13": 256, b"ic08": 256, b"ic14": 512, b"ic09": 512,
                b"ic10": 1024}
    for kind, size in expected.items():
        assert entries[kind][:8] == b"\x89PNG\r\n\x1a\n", kind
        assert Image.open(io.BytesIO(entries[kind])).size == (size, size), kind
    assert Image.open(io.BytesIO(data)).format == "ICNS"  # Pillow reads it too


def test_resources_load_through_importlib_resources():
    root = resources.files("mpsstudio.resources")
    assert (root / "icon.svg").read_text().lstrip().startswith("<svg")
    with resources.as_file(root / "icons" / "icon-64.png") as path:
        assert Path(path).stat().st_size > 0


def test_a_built_wheel_carries_the_resources(tmp_path):
    """Build the wheel from a copy of the sources and list what it holds under mpsstudio/resources."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("mpsstudio",):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("mpsstudio-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"mpsstudio/resources/__init__.py", "mpsstudio/resources/icon.svg", "mpsstudio/resources/icon.icns"}
    expected |= {f"mpsstudio/resources/icons/icon-{size}.png" for size in ICON_SIZES}
    assert expected <= names
    assert not any(n.startswith("resources/") for n in names)  # installed as a package, not a stray folder
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "mpsstudio").rglob("*.py")}
    assert modules <= names, f"not in the wheel (pyproject's packages): {sorted(modules - names)}"


def test_make_icons_writes_an_icns_that_pillow_reads_back(tmp_path):
    from PIL import Image

    make_icons = _load("mpsstudio_make_icons", PACKAGING / "make_icons.py")
    pngs = {}
    for size in ICON_SIZES:
        buf = io.BytesIO()
        Image.new("RGBA", (size, size), (10, 132, 255, 255)).save(buf, "PNG")
        pngs[size] = buf.getvalue()
    make_icons.write_icns(pngs, tmp_path / "icon.icns")
    icns = Image.open(tmp_path / "icon.icns")
    assert icns.format == "ICNS"
    assert {(512, 512, 2), (512, 512, 1), (256, 256, 1), (128, 128, 1), (16, 16, 2)} <= set(icns.info["sizes"])
    icns.size = (128, 128)
    icns.load()
    assert icns.getpixel((64, 64)) == (10, 132, 255, 255)
    assert [p.name for p in tmp_path.iterdir()] == ["icon.icns"]


def test_fallback_is_set_only_when_unset():
    env = {}
    assert frozen.ensure_mps_fallback(env) is True
    assert env == {"PYTORCH_ENABLE_MPS_FALLBACK": "1", "MPSSTUDIO_SET_MPS_FALLBACK": "1"}
    env = {"PYTORCH_ENABLE_MPS_FALLBACK": "0"}
    assert frozen.ensure_mps_fallback(env) is False
    assert env == {"PYTORCH_ENABLE_MPS_FALLBACK": "0"}  # the user's choice, and no claim that the app set it
    env = {"PYTORCH_ENABLE_MPS_FALLBACK": "1"}
    assert frozen.ensure_mps_fallback(env) is False and "MPSSTUDIO_SET_MPS_FALLBACK" not in env


def test_log_path_is_under_the_platformdirs_log_dir(monkeypatch):
    monkeypatch.delenv("MPSSTUDIO_LOG_DIR")
    path = frozen.log_file_path()
    assert path.name == "mpsstudio.log"
    assert path.parent == Path(platformdirs.user_log_dir("MPS Studio", appauthor=False))


def test_crash_log_records_uncaught_exceptions(tmp_path, monkeypatch):
    import faulthandler
    import threading

    enabled = {}
    monkeypatch.setattr(faulthandler, "enable", lambda file, all_threads: enabled.update(file=file))  # keep pytest's
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(frozen, "_log_stream", None)
    log = tmp_path / "logs" / "mpsstudio.log"
    try:
        assert frozen.setup_crash_log(log) == log
        assert enabled["file"] is frozen._log_stream
        try:
            raise ValueError("boom for the log")
        except ValueError:
            sys.excepthook(*sys.exc_info())
        text = log.read_text()
        assert "MPS Studio" in text and "started" in text
        assert "ValueError: boom for the log" in text
    finally:
        if frozen._log_stream is not None:
            frozen._log_stream.close()


def test_crash_log_is_rotated_when_large(tmp_path):
    log = tmp_path / "mpsstudio.log"
    log.write_bytes(b"x" * (frozen.LOG_MAX_BYTES + 1))
    frozen._rotate(log)
    assert not log.exists() and (tmp_path / "mpsstudio.log.1").stat().st_size == frozen.LOG_MAX_BYTES + 1


def test_psn_argument_is_dropped():
    assert frozen._clean_argv(["MPS Studio", "-psn_0_12345", "--demo"]) == ["MPS Studio", "--demo"]


# ---- the house: rooms of a readable size (docs/architecture.md, "Layers, checked by a machine") -------------

PACKAGE_DIR = Path(mpsstudio.__file__).parent
MAX_MODULE_LINES = 400
MAX_FOLDER_MODULES = 15
# The limits are signs, not numbers to trim toward: a module past ~400 lines or a folder past ~15 modules asks "is
# this two things?". Where the answer was no, it is written here, and the module may grow without squeezing lines.
ANSWERED: dict[str, str] = {
    # asked "is this two things?" and answered no (2026-11-28, when typing them took them past 400 lines):
    "engine/process": "one thing (asked 2026-12-02, when handles.py's in-process stand-in became in_process.py and "
                      "made it 16): run processes, both sides of the pipe and what ends them; its modules import each "
                      "other (a job, its handle, its child, its messages), so halves would too.",
    "engine/basics": "one thing (asked 2026-12-02, when request.py made it 16): the torch-free bottom layer that "
                     "every package and both front ends read, held to that by an import contract; its modules are "
                     "each one thing (what a run is and asks for, what it yields, how numbers and errors are said, "
                     "files and folders, redaction). Split by those, the halves would import each other.",
}


def test_no_module_is_over_400_lines_without_an_answer():
    long = {str(p.relative_to(PACKAGE_DIR)): n for p in PACKAGE_DIR.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert {k: n for k, n in long.items() if k not in ANSWERED} == {}, "split these along their responsibilities"


def test_no_folder_holds_over_15_modules_without_an_answer():
    crowded = {}
    for folder in [PACKAGE_DIR, *(p for p in PACKAGE_DIR.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        modules = list(folder.glob("*.py"))  # __init__.py counted too
        if len(modules) > MAX_FOLDER_MODULES and str(folder.relative_to(PACKAGE_DIR)) not in ANSWERED:
            crowded[str(folder.relative_to(PACKAGE_DIR))] = len(modules)
    assert crowded == {}, "group these modules into packages by responsibility"


def private_imports(root: Path) -> list[str]:
    """Every `from x import _name` under root: a private name shared across modules should be made public."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [f"{path.relative_to(root)}:{node.lineno} {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_private_name_is_imported_across_modules():
    assert private_imports(PACKAGE_DIR) == []


def test_the_private_import_check_finds_one(tmp_path):
    (tmp_path / "a.py").write_text("from .b import _hidden, shown\nfrom __future__ import annotations\n")
    assert private_imports(tmp_path) == ["a.py:1 _hidden"]
