"""A tool result beside the earlier ones of its kind (its row's `since`: a device check says what changed since the
last check of the same machine). Both front ends call it before they keep and show a result."""

from __future__ import annotations

from ..basics.formatting import instant
from ..tools import registry


def beside_earlier(kind: str, result: dict, store=None) -> dict:
    """`result` as its tool's row says it beside the kept results of its kind; as it is when the tool compares
    nothing or the history cannot be read (the result itself is never lost for that)."""
    tool = registry.TOOLS.get(kind)
    if tool is None or not tool.since:
        return result
    from .store import RunStore

    try:
        opened = store if store is not None else RunStore()
        try:
            records = [r for r in opened.tools((kind,)) if not r.problem]
        finally:
            if store is None:
                opened.close()
    except Exception:  # a history in use or unreadable: the result stands without the comparison
        return result
    records.sort(key=lambda r: instant(r.created_at), reverse=True)
    said = tool.call("since", result, [{**r.result, "created_at": r.created_at} for r in records])
    return tool.call("rederived", said) if tool.rederived else said  # its sentence says the comparison too
