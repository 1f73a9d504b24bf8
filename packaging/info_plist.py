"""The macOS bundle's Info.plist values: the one place they are kept (read by mpsstudio.spec and the tests).

Key                                 Value                                Why
CFBundleName / CFBundleDisplayName  "MPS Studio"                         name in the menu bar, Finder and Dock
CFBundleIdentifier                  org.mpsstudio.MPSStudio              identifies the app (preferences, permissions)
CFBundleShortVersionString          mpsstudio.__version__                "Version 0.1.0" in Finder and About
CFBundleVersion                     mpsstudio.__version__                build number (same as the version)
LSMinimumSystemVersion              14.0 (apple.mps_min_macos of the     the first macOS on which the bundled PyTorch
                                    torch constraints.txt pins)          runs MPS
NSHighResolutionCapable             True                                 sharp text and plots on Retina displays
NSRequiresAquaSystemAppearance      False                                follows the system's dark mode
LSApplicationCategoryType           public.app-category.developer-tools  category in Finder and the App Store
CFBundleDocumentTypes               folders (public.folder), Viewer      a folder of images can be dropped on the
                                                                         app's Dock icon (Qt delivers it as a
                                                                         QFileOpenEvent to the running app)
CFBundleIconFile                    icon.icns                            set by PyInstaller from the spec's icon=
"""

from __future__ import annotations

import re
from pathlib import Path

APP_NAME = "MPS Studio"
BUNDLE_NAME = f"{APP_NAME}.app"
BUNDLE_IDENTIFIER = "org.mpsstudio.MPSStudio"
CATEGORY = "public.app-category.developer-tools"
ROOT = Path(__file__).resolve().parent.parent


def _apple_facts():
    """mpsstudio/engine/machine/apple.py, loaded from the source tree by path (torch-free; no other installed copy)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mpsstudio_apple_facts", ROOT / "mpsstudio" / "engine" / "machine" / "apple.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _min_macos() -> str:
    """The macOS the bundled PyTorch (the one constraints.txt pins) needs for the Apple GPU."""
    facts = _apple_facts()
    pinned = facts.pinned_torch((ROOT / "constraints.txt").read_text(encoding="utf-8"))
    if pinned is None:
        raise RuntimeError("constraints.txt pins no torch: the bundle's minimum macOS cannot be known")
    return facts.macos_text(facts.mps_min_macos(pinned))


MIN_MACOS = _min_macos()


def package_version() -> str:
    """mpsstudio.__version__, read from the source tree (the spec must not pick up another installed copy)."""
    text = (ROOT / "mpsstudio" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', text, re.M)
    if not match:
        raise RuntimeError("mpsstudio/__init__.py has no __version__")
    return match.group(1)


def info_plist(version: str | None = None) -> dict:
    """The values PyInstaller's BUNDLE(info_plist=...) merges into Contents/Info.plist."""
    version = version or package_version()
    return {
        "CFBundleName": APP_NAME,
        "CFBundleDisplayName": APP_NAME,
        "CFBundleIdentifier": BUNDLE_IDENTIFIER,
        "CFBundleShortVersionString": version,
        "CFBundleVersion": version,
        "LSMinimumSystemVersion": MIN_MACOS,
        "NSHighResolutionCapable": True,
        "NSRequiresAquaSystemAppearance": False,
        "LSApplicationCategoryType": CATEGORY,
        "CFBundleDocumentTypes": [
            {
                "CFBundleTypeName": "Folder of images",
                "CFBundleTypeRole": "Viewer",
                "LSItemContentTypes": ["public.folder"],
                "LSHandlerRank": "Alternate",
            }
        ],
    }
