"""Render the app icon (mpsstudio/resources/icon.svg, the source) to PNGs and a macOS .icns.

    python packaging/make_icons.py          # writes mpsstudio/resources/icons/icon-<n>.png and its icon.icns

Runs headless (QT_QPA_PLATFORM=offscreen is set if no platform is given); needs PySide6 (QtSvg) to draw
the SVG and Pillow, whose ICNS writer makes the .icns on any OS (no iconutil, so Linux can make it too).
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

RESOURCES = Path(__file__).resolve().parent.parent / "mpsstudio" / "resources"
SIZES = (16, 32, 64, 128, 256, 512, 1024)

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


def write_icns(pngs: dict[int, bytes], path: Path) -> None:
    """The .icns from the rendered PNGs (Pillow picks each entry's size from them), written atomically."""
    from PIL import Image

    images = [Image.open(io.BytesIO(pngs[size])) for size in sorted(pngs)]
    part = path.with_name(path.name + ".part")
    images[-1].save(part, format="ICNS", append_images=images[:-1])
    part.replace(path)


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    svg = RESOURCES / "icon.svg"
    out = RESOURCES / "icons"
    out.mkdir(exist_ok=True)
    pngs = {size: render_png(svg, size) for size in SIZES}
    for size, png in pngs.items():
        (out / f"icon-{size}.png").write_bytes(png)
    write_icns(pngs, RESOURCES / "icon.icns")
    total = sum(len(p) for p in pngs.values())
    print(f"make_icons: {len(pngs)} PNGs ({total / 1024:.0f} KiB) in {out}, icon.icns "
          f"({(RESOURCES / 'icon.icns').stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
