"""`mpsstudio history --push URL [ID ...]`, `--pull URL --experiment NAME` and `--export-bmf FILE`: a team's
history on its MLflow tracking server, and the figures in Bencher's format (engine/team)."""

from __future__ import annotations

import sys

from ..engine.basics.formatting import plural, printable
from .common import EXIT_OK, EXIT_RUN_FAILED


def wanted(args) -> bool:
    return bool(args.push or args.pull or args.export_bmf or args.login or args.logout or args.user is not None
                or args.experiment is not None or args.drop_queue)


def cmd_team(args, store) -> int:
    from ..engine.basics.errors import UserError

    if args.experiment is not None and not (args.push or args.pull):
        raise UserError("--experiment names the experiment of --push or --pull; give one of them too.")
    if args.user is not None and not args.login:
        raise UserError("--user names the user of --login URL; give --login too.")
    if args.login or args.logout:
        _keychain(args)
    if args.drop_queue:
        from ..engine.team.server import check_url

        from ..engine.history.library import RunLibrary

        print(RunLibrary(store).stop_waiting(check_url(args.drop_queue)), file=sys.stderr)
    if args.export_bmf:
        from ..engine.team import bmf

        doc = bmf.export(store.all(), args.export_bmf)
        print(f"wrote {plural(len(doc), 'benchmark')} in Bencher's metric format to {printable(args.export_bmf)}",
              file=sys.stderr)
    code = EXIT_OK
    if args.push:
        from ..engine.team.push import everything, push

        url, *ids = args.push
        ids = ids or everything(store)
        done = push(store, url, ids, args.experiment or "", progress=_say)
        print(done.sentence(), file=sys.stderr)
        code = EXIT_RUN_FAILED if done.waiting else code
    if args.pull:
        from ..engine.team import pull

        if args.experiment is None:  # which experiments there are to pull
            names = pull.experiments(args.pull)
            print("\n".join(printable(n) for n in names) if names else
                  f"The tracking server at {printable(args.pull)} holds no experiment yet.")
            print(f"mpsstudio: `history --pull {printable(args.pull)} --experiment NAME` brings one in.",
                  file=sys.stderr)
            return code
        got = pull.pull(store, args.pull, args.experiment, progress=_say)
        print(got.sentence(), file=sys.stderr)
    return code


def _keychain(args) -> None:
    """--login URL [--user NAME] (the secret asked for without echo, or one line of standard input) and --logout."""
    from ..engine.basics.errors import UserError
    from ..engine.team import credentials
    from ..engine.team.server import check_url

    if args.logout:
        print(credentials.forget(check_url(args.logout)), file=sys.stderr)
    if args.login:
        url = check_url(args.login)
        credentials.require_keychain()  # said before anything is asked for
        what = f"{args.user}'s password" if args.user else "token"
        if sys.stdin.isatty():
            import getpass

            secret = getpass.getpass(f"{what[:1].upper()}{what[1:]} for {url}: ")
        else:  # piped (`security find-generic-password ... -w | mpsstudio history --login URL`, a CI secret)
            secret = sys.stdin.readline().rstrip("\r\n")
        if not secret.strip():
            raise UserError(f"No {what} was given; nothing was kept in the keychain.")
        print(credentials.remember(url, secret, args.user or ""), file=sys.stderr)


def _say(words: str) -> None:
    print(f"mpsstudio: {words}", file=sys.stderr)
