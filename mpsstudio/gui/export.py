"""Pictures of widgets for sharing: a sharp (Retina-scale) PNG with a title header in the palette's colours."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics, QGuiApplication, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QWidget

from ..engine.basics.errors import UserError
from ..engine.basics.files import atomic_path

MARGIN = 20  # logical pixels around the header and the widget


def export_scale(widget: QWidget | None = None) -> float:
    """At least 2x, more on a screen that is denser still, so the picture is sharp on a Retina display."""
    screen = widget.screen() if widget is not None else None
    screen = screen or QGuiApplication.primaryScreen()
    ratio = screen.devicePixelRatio() if screen is not None else 1.0
    return max(2.0, float(ratio))


def _header_fonts(widget: QWidget) -> tuple[QFont, QFont]:
    title = QFont(widget.font())
    title.setBold(True)
    title.setPointSizeF(max(title.pointSizeF(), 10.0) * 1.45)
    subtitle = QFont(widget.font())
    subtitle.setPointSizeF(max(subtitle.pointSizeF(), 10.0) * 1.05)
    return title, subtitle


def render_png(widget: QWidget, path: str, title: str, subtitle: str = "", scale: float | None = None) -> str:
    """Render `widget` below a title header into a PNG at `path`; raise UserError if it cannot be written."""
    scale = float(scale) if scale else export_scale(widget)
    palette = widget.palette()
    title_font, sub_font = _header_fonts(widget)
    title_fm, sub_fm = QFontMetrics(title_font), QFontMetrics(sub_font)
    size = widget.size()
    width = size.width() + 2 * MARGIN
    header = MARGIN + title_fm.height() + (6 + sub_fm.height() if subtitle else 0) + 14
    height = header + size.height() + MARGIN

    pixmap = QPixmap(round(width * scale), round(height * scale))
    pixmap.setDevicePixelRatio(scale)
    pixmap.fill(palette.color(QPalette.ColorRole.Window))
    painter = QPainter(pixmap)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        text_width = width - 2 * MARGIN
        painter.setPen(palette.color(QPalette.ColorRole.WindowText))
        painter.setFont(title_font)
        painter.drawText(QRect(MARGIN, MARGIN, text_width, title_fm.height()),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         title_fm.elidedText(title, Qt.TextElideMode.ElideRight, text_width))
        if subtitle:
            painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
            painter.setFont(sub_font)
            painter.drawText(QRect(MARGIN, MARGIN + title_fm.height() + 6, text_width, sub_fm.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             sub_fm.elidedText(subtitle, Qt.TextElideMode.ElideRight, text_width))
        widget.render(painter, QPoint(MARGIN, header))
    finally:
        painter.end()

    image = pixmap.toImage()
    # 72 dpi per logical pixel, as macOS writes Retina screenshots: viewers show the picture at its logical
    # size, and the file itself says its scale.
    dots_per_metre = round(72 * scale / 0.0254)
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    image.setText("Title", title)
    image.setText("Software", "MPS Studio")
    target = Path(path)
    if not target.parent.is_dir():
        raise UserError(f"The folder {target.parent} does not exist; choose another place for {target.name}.")
    try:
        with atomic_path(target) as part:
            if not image.save(str(part), "PNG"):  # type: ignore[call-overload]  # PySide6 accepts str formats
                raise UserError(f"{target.name} cannot be written in {target.parent}; "
                                "choose a folder you can write to.")
    except OSError as exc:
        raise UserError(f"{target.name} cannot be written ({exc.strerror or exc.__class__.__name__}); "
                        "choose another folder.") from None
    return str(target)


def png_scale(path: str) -> float:
    """The scale a PNG written by render_png records (its dpi / 72); 1.0 for a picture without one."""
    from PySide6.QtGui import QImage

    dpm = QImage(path).dotsPerMeterX()
    return round(dpm * 0.0254 / 72, 2) if dpm > 0 else 1.0


def report_markdown(report) -> str:
    """The engine's report (engine/report) as Markdown, scrubbed of paths, user and host names."""
    from ..engine.report import scrubbed
    from ..engine.report.render import to_markdown

    return to_markdown(scrubbed(report))


def write_report_html(report, path: str) -> str:
    """Write the report as one HTML file; the sentence to show (what was written, or why not)."""
    from ..engine.basics.errors import UserError
    from ..engine.basics.files import write_atomic
    from ..engine.basics.formatting import error_line
    from ..engine.report import scrubbed
    from ..engine.report.render import to_html

    try:
        write_atomic(path, to_html(scrubbed(report)))
    except (OSError, UserError) as exc:
        return f"The report could not be written to {path} ({error_line(exc)}); choose another folder."
    return f"Exported the report to {path.replace(chr(92), '/').rsplit('/', 1)[-1]} (one HTML file with its chart)."


def copy_to_clipboard(text: str) -> None:
    from PySide6.QtWidgets import QApplication

    QApplication.clipboard().setText(text)
