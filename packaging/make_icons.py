"""Render the app icon (mpsstudio/resources/icon.svg, the source) to PNGs and a macOS .icns.

    python packaging/make_icons.py          # writes mpsstudio/resources/icons/icon-<n>.png and icon.icns

Runs headless (QT_QPA_PLATFORM=offscreen is set if no platform is given); needs only PySide6 (QtSvg).
The .icns container is written here, not by iconutil, so the icons can be made on Linux: an 'icns'
header, a table of contents, then one entry per (size, scale) holding a PNG payload.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

RESOURCES = Path(__file__).resolve().parent.parent / "mpsstudio" / "resources"
SIZES = (16, 32, 64, 128, 256, 512, 1024)

# ICNS element types with PNG payloads (macOS 10.7+), and the pixel size each holds.
ICNS_TYPES = (
    (b"ic11", 32),    # 16x16@2x
    (b"ic12", 64),    # 32x32@2x
    (b"ic07", 128),   # 128x128
    (b"ic13", 256),   # 128x128@2x
    (b"ic08", 256),   # 256x256
    (b"ic14", 512),   # 256x256@2x
    (b"ic09", 512),   # 512x512
    (b"ic10", 1024),  # 512x512@2x
)


def render_png(svg: Path, size: int) -> bytes:
    """The SVG drawn at size x size pixels (transparent background), as PNG bytes."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _ = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"make_icons: {svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.Antialiasing)
    painter.setRenderHint(QPainter.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICNS container: 'icns' + total length, a 'TOC ' entry, then the PNG entries (big-endian lengths)."""
    entries = [(kind, pngs[size]) for kind, size in ICNS_TYPES]
    toc = b"TOC " + struct.pack(">I", 8 + 8 * len(entries))
    toc += b"".join(kind + struct.pack(">I", 8 + len(png)) for kind, png in entries)
    body = toc + b"".join(kind + struct.pack(">I", 8 + len(png)) + png for kind, png in entries)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    svg = RESOURCES / "icon.svg"
    out = RESOURCES / "icons"
    out.mkdir(exist_ok=True)
    pngs = {size: render_png(svg, size) for size in SIZES}
    for size, png in pngs.items():
        (out / f"icon-{size}.png").write_bytes(png)
    (RESOURCES / "icon.icns").write_bytes(icns_bytes(pngs))
    total = sum(len(p) for p in pngs.values())
    print(f"make_icons: {len(pngs)} PNGs ({total / 1024:.0f} KiB) in {out}, icon.icns "
          f"({(RESOURCES / 'icon.icns').stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
