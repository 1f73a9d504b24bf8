"""`mpsstudio history --push URL [ID ...]`, `--pull URL --experiment NAME` and `--export-bmf FILE`: a team's
history on its MLflow tracking server, and the figures in Bencher's format (engine/team)."""

from __future__ import annotations

import sys

from ..engine.basics.formatting import plural, printable
from .common import EXIT_OK, EXIT_RUN_FAILED


def wanted(args) -> bool:
    return bool(args.push or args.pull or args.export_bmf)


def cmd_team(args, store) -> int:
    from ..engine.basics.errors import UserError

    if args.experiment is not None and not (args.push or args.pull):
        raise UserError("--experiment names the experiment of --push or --pull; give one of them too.")
    if args.export_bmf:
        from ..engine.team import bmf

        doc = bmf.export(store.all(), args.export_bmf)
        print(f"wrote {plural(len(doc), 'benchmark')} in Bencher's metric format to {printable(args.export_bmf)}",
              file=sys.stderr)
    code = EXIT_OK
    if args.push:
        from ..engine.team.push import push

        url, *ids = args.push
        ids = ids or [r.id for r in store.summaries()]
        done = push(store, url, ids, args.experiment or "", progress=_say)
        print(done.sentence(), file=sys.stderr)
        code = EXIT_RUN_FAILED if done.waiting else code
    if args.pull:
        from ..engine.team.pull import pull

        got = pull(store, args.pull, args.experiment or "", progress=_say)
        print(got.sentence(), file=sys.stderr)
    return code


def _say(words: str) -> None:
    print(f"mpsstudio: {words}", file=sys.stderr)
