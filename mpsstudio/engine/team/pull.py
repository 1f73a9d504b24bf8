"""A team's runs pulled from its MLflow tracking server into the local history: every run MPS Studio pushed to an
experiment (DONE_TAG set), read from the run's JSON it pushed as an artifact and checked as every import is
(history/runfiles.import_json: the format, the version, every field), then all added in one transaction or none.
What the server answers is untrusted: a page that is not MLflow's JSON, a run whose JSON is not an export of it, a
paging that does not end: one sentence each, and the local history unchanged."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import printable
from . import mlflow_run
from .answers import object_in, tag_of, text_in
from .server import Refused, Server, Unreachable

PAGE = 500
MAX_PAGES = 40  # 20,000 runs in one experiment: beyond it the pull stops, said


@dataclass
class Pulled:
    url: str
    experiment: str
    added: int = 0
    known: int = 0
    runs: int = 0

    def sentence(self) -> str:
        if not self.runs:
            return f"The experiment {self.experiment!r} on {self.url} holds no run MPS Studio pushed."
        return (f"Pulled {self.runs} run{'s' if self.runs != 1 else ''} of {self.experiment!r} from {self.url}: "
                f"{self.added} added, {self.known} already in the history.")


def pull(store, url: str, experiment: str, server: Server | None = None, progress=None) -> Pulled:
    """The experiment's pushed runs added to `store` (all or none); UserError, one sentence, for a server that does
    not answer or answers what MLflow's API does not."""
    server = server or Server(url)
    try:
        return _pull(store, server, experiment, progress)
    except Unreachable as exc:
        raise UserError(f"{str(exc)[:1].upper()}{str(exc)[1:]}; nothing was pulled: try again when it answers.") from None


def _pull(store, server: Server, experiment: str, progress) -> Pulled:
    name = str(experiment).strip()
    if not name:
        raise UserError("--pull needs --experiment NAME: the experiment on the server whose runs to bring in.")
    try:
        found = server.call("GET", "experiments/get-by-name", query={"experiment_name": name})
    except Refused as exc:
        if exc.code == "RESOURCE_DOES_NOT_EXIST":
            raise UserError(f"The tracking server at {server.url} has no experiment named {printable(name)!r}; "
                            "its names are those `history --push` made (mpsstudio · model · dataset · ...).") from None
        raise
    exp = text_in(object_in(found, "experiment", server), "experiment_id", server)
    runs = []
    with tempfile.TemporaryDirectory(prefix="mpsstudio-pull-") as folder:
        for n, entry in enumerate(_pushed_runs(server, exp)):
            if progress is not None:
                progress(f"reading run {n + 1} from {server.url}")
            runs.append(_read_run(server, entry, Path(folder) / f"{n}.json"))
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise UserError(f"The tracking server at {server.url} holds one MPS Studio run twice in {printable(name)!r}; "
                        "nothing was pulled.")
    report = Pulled(server.url, name, runs=len(runs))
    if runs:
        report.added, report.known = store.add_imported(runs)
    return report


def _pushed_runs(server: Server, exp: str):
    token, seen = None, set()
    for _ in range(MAX_PAGES):
        body = {"experiment_ids": [exp], "max_results": PAGE, "filter": f"tags.`{mlflow_run.DONE_TAG}` = '1'"}
        if token:
            body["page_token"] = token
        answer = server.call("POST", "runs/search", body)
        page = answer.get("runs", [])
        if not isinstance(page, list) or len(page) > PAGE or not all(isinstance(r, dict) for r in page):
            raise UserError(f"The tracking server at {server.url} answered a search with a page that is not MLflow's "
                            f"(a list of at most {PAGE} runs); nothing was pulled.")
        yield from page
        token = answer.get("next_page_token")
        if not token:
            return
        if not isinstance(token, str) or len(token) > 4096 or token in seen:
            raise UserError(f"The tracking server at {server.url} answered with a page token that does not page on; "
                            "nothing was pulled.")
        seen.add(token)
    raise UserError(f"The experiment holds more than {PAGE * MAX_PAGES:,} runs; nothing was pulled (pull a narrower "
                    "experiment).")


def _read_run(server: Server, entry: dict, path: Path):
    from ..history.runfiles import import_json

    info = object_in(entry, "info", server)
    artifacts = info.get("artifact_uri")
    tagged = tag_of(entry, mlflow_run.RUN_ID_TAG)
    if not isinstance(artifacts, str) or not artifacts.startswith("mlflow-artifacts:/") or not tagged:
        raise UserError(f"The tracking server at {server.url} holds a pushed run without its MPS Studio JSON "
                        "(artifacts not served by the server); nothing was pulled.")
    path.write_bytes(server.get_artifact(artifacts[len("mlflow-artifacts:/"):].lstrip("/") + "/mpsstudio-run.json"))
    try:
        found = import_json(path)
    except UserError as exc:
        raise UserError(f"The tracking server at {server.url} gave run {printable(tagged)[:40]} as JSON that is not "
                        f"an export of it ({str(exc).rstrip('.')}); nothing was pulled.") from None
    if len(found) != 1 or found[0].id != tagged:
        raise UserError(f"The tracking server at {server.url} gave run {printable(tagged)[:40]} as JSON of another "
                        "run; nothing was pulled.")
    return found[0]
