"""The results table's columns and cells: the engine's result columns (engine/history/columns.py) plus the state
and comparison columns, the columns hidden at first, and what one cell holds (text, sort key, tooltip)."""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from datetime import datetime

from PySide6.QtCore import Qt

from ...engine.basics.formatting import is_finite, local_time
from ...engine.history.columns import BY_KEY, TABLE_COLUMNS

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
RUN_ID_ROLE = Qt.ItemDataRole.UserRole + 2


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    tooltip: str
    numeric: bool = False


COLUMNS = (
    Column("state", "", "How the run ended: \u2713 finished, \u2715 failed, \u25a0 stopped (cancelled); \u26a0 finished "
           "but its numbers were noisy."),
    Column("comparison", "", "Comparison: runs with the same letter share every setting but the device."),
    *(Column(k, BY_KEY[k].title, BY_KEY[k].tooltip, BY_KEY[k].numeric) for k in TABLE_COLUMNS),
    Column("note", BY_KEY["note"].title, BY_KEY["note"].tooltip),
)
COL = {c.header or c.key.capitalize(): i for i, c in enumerate(COLUMNS)}
# Hidden until the user shows them (right-click a column header): the table fits a 1280-pixel-wide window.
DEFAULT_HIDDEN = ("Precision", "Warm-up", "Final loss", "Status")
STATE_GLYPHS = {"finished": "\u2713", "failed": "\u2715", "cancelled": "\u25a0", "interrupted": "\u25a0"}
STATE_WORDS = {"finished": "Finished", "failed": "Failed", "cancelled": "Stopped before the end (cancelled)",
               "interrupted": "Interrupted: MPS Studio ended during the run (killed, or the computer stopped)"}


def fmt_time(iso: str) -> str:
    """"21 Nov 14:03" in local time; the year appears when it is not this year."""
    dt = local_time(iso)
    if dt is None:
        return iso
    if dt.year != datetime.now().astimezone().year:
        return f"{dt.day} {dt:%b %Y %H:%M}"
    return f"{dt.day} {dt:%b %H:%M}"


def group_letter(i: int) -> str:
    """A, B, ..., Z, AA, AB, ...: a short name for the i-th comparison."""
    letters = string.ascii_uppercase
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = letters[r] + out
    return out


@dataclass
class Cell:
    text: str
    sort: object
    tooltip: str = ""


def sort_number(v) -> float:
    """Missing values sort below every number."""
    return float(v) if is_finite(v) else -math.inf
