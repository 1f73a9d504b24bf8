"""A team's runs and tool results pulled from its MLflow tracking server into the local history: everything MPS Studio
pushed to an experiment (DONE_TAG set), read from the JSON it pushed as an artifact (a run's or a tool result's, as
KIND_TAG says) and checked as every import is (history/runfiles.import_json, import_tool_json: the format, the
version, every field), then all added in one transaction or none.
What the server answers is untrusted: a page that is not MLflow's JSON, a run whose JSON is not an export of it, a
paging that does not end: one sentence each, and the local history unchanged."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import printable, runs_and_results
from . import mlflow_run
from .answers import artifact_folder, object_in, tag_of, text_in
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
    tools: int = 0  # tool results (sweeps, tunes, ...), beside the runs

    def sentence(self) -> str:
        name = repr(printable(self.experiment)[:200])
        if not self.runs and not self.tools:
            return f"The experiment {name} on {self.url} holds nothing MPS Studio pushed."
        return (f"Pulled {runs_and_results(self.runs, self.tools)} of {name} from {self.url}: {self.added} added, "
                f"{self.known} already in the history.")


def pull(store, url: str, experiment: str, server: Server | None = None, progress=None) -> Pulled:
    """The experiment's pushed runs added to `store` (all or none); UserError, one sentence, for a server that does
    not answer or answers what MLflow's API does not."""
    server = server or Server(url)
    try:
        return _pull(store, server, experiment, progress)
    except Unreachable as exc:
        raise UserError(f"{str(exc)[:1].upper()}{str(exc)[1:]}; nothing was pulled: try again when it answers.") from None


def experiments(url: str, server: Server | None = None) -> list[str]:
    """The names of the server's active experiments, MPS Studio's ("mpsstudio · ...") first, each group by name:
    what there is to pull. UserError, one sentence, as for a pull."""
    server = server or Server(url)
    names: list[str] = []
    token, seen = None, set[str]()
    try:
        for _ in range(MAX_PAGES):
            body: dict = {"max_results": PAGE, "view_type": "ACTIVE_ONLY"}
            if token:
                body["page_token"] = token
            answer = server.call("POST", "experiments/search", body)
            page = answer.get("experiments", [])
            if not isinstance(page, list) or len(page) > PAGE:
                raise UserError(f"The tracking server at {server.url} answered a search with a page that is not "
                                f"MLflow's (a list of at most {PAGE} experiments).")
            for e in page:  # MLflow's SQL stores keep a name of at most 256 characters
                name = e.get("name") if isinstance(e, dict) else None
                if not isinstance(name, str) or not name or len(name) > 256:
                    raise UserError(f"The tracking server at {server.url} answered a search with an experiment that "
                                    "has no name MLflow's API gives; check that the address is an MLflow tracking "
                                    "server.")
                names.append(name)
            token = _next_token(server, answer, seen)
            if token is None:
                break
        else:
            raise UserError(f"The tracking server at {server.url} holds more than {PAGE * MAX_PAGES:,} experiments; "
                            "give the one to pull with --experiment NAME.")
    except Unreachable as exc:
        raise UserError(f"{str(exc)[:1].upper()}{str(exc)[1:]}; try again when it answers.") from None
    ours = sorted(n for n in set(names) if n.startswith("mpsstudio"))
    return ours + sorted(n for n in set(names) if not n.startswith("mpsstudio"))


def _next_token(server: Server, answer: dict, seen: set) -> str | None:
    """The page token of a search's next page (None on the last); UserError for one that does not page on."""
    token = answer.get("next_page_token")
    if not token:
        return None
    if not isinstance(token, str) or len(token) > 4096 or token in seen:
        raise UserError(f"The tracking server at {server.url} answered with a page token that does not page on; "
                        "nothing was pulled.")
    seen.add(token)
    return token


def _pull(store, server: Server, experiment: str, progress) -> Pulled:
    name = str(experiment).strip()
    if not name:
        raise UserError("--pull needs --experiment NAME: the experiment on the server whose runs to bring in.")
    try:
        found = server.call("GET", "experiments/get-by-name", query={"experiment_name": name})
    except Refused as exc:
        if exc.code == "RESOURCE_DOES_NOT_EXIST":
            raise UserError(f"The tracking server at {server.url} has no experiment named {printable(name)[:200]!r}; "
                            "its names are those `history --push` made (mpsstudio · model · dataset · ...).") from None
        raise
    held = object_in(found, "experiment", server)
    if held.get("lifecycle_stage") == "deleted":
        raise UserError(f"The experiment {printable(name)[:200]!r} on {server.url} was deleted in MLflow; restore it "
                        "there to pull it.")
    exp = text_in(held, "experiment_id", server)
    runs: list = []  # RunResults
    tools: list = []  # ToolRecords
    with tempfile.TemporaryDirectory(prefix="mpsstudio-pull-") as folder:
        for n, entry in enumerate(once_each(list(_pushed_runs(server, exp)))):
            if progress is not None:
                progress(f"reading {n + 1} from {server.url}")
            kind = tag_of(entry, mlflow_run.KIND_TAG) or "run"  # runs pushed before tool results went carry none
            into = Path(folder) / str(n)  # the artifact keeps its name: a sentence about it names it
            into.mkdir()
            (runs if kind == "run" else tools).append(_read(server, entry, kind, into))
    ids = [r.id for r in runs] + [t.id for t in tools]
    if len(set(ids)) != len(ids):
        raise UserError(f"The tracking server at {server.url} holds one MPS Studio run or result twice in "
                        f"{printable(name)[:200]!r}; nothing was pulled.")
    for record in tools:  # where it came from, as an import names its file
        record.result["imported_from"] = f"{printable(name)[:200]} on {server.url}"
    report = Pulled(server.url, name, runs=len(runs), tools=len(tools))
    if ids:
        report.added, report.known = store.add_imported(runs, tools=tools)
    return report


def once_each(entries: list) -> list:
    """One MLflow run per MPS Studio id: two pushes that raced (two machines holding the same run, pushing at once)
    can leave two copies, which hold the same run; the copy every reader chooses alike is kept (the smallest MLflow
    run id), so a race never locks an experiment out of pulls. An entry without the id is left for _read to refuse."""
    chosen: dict = {}
    rest = []
    for entry in entries:
        ident = tag_of(entry, mlflow_run.RUN_ID_TAG)
        info = entry.get("info") if isinstance(entry.get("info"), dict) else {}
        key = str(info.get("run_id"))
        if not ident:
            rest.append(entry)
        elif ident not in chosen or key < chosen[ident][0]:
            chosen[ident] = (key, entry)
    return [entry for _, entry in chosen.values()] + rest


def _pushed_runs(server: Server, exp: str):
    token, seen = None, set[str]()
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
        token = _next_token(server, answer, seen)
        if token is None:
            return
    raise UserError(f"The experiment holds more than {PAGE * MAX_PAGES:,} runs; nothing was pulled (pull a narrower "
                    "experiment).")


def _fetch(server: Server, entry: dict, name: str, path: Path) -> str:
    """The artifact `name` of a pushed MLflow run written to `path`; its MPS Studio id (RUN_ID_TAG)."""
    folder = artifact_folder(object_in(entry, "info", server))
    tagged = tag_of(entry, mlflow_run.RUN_ID_TAG)
    if folder is None or not tagged:
        raise UserError(f"The tracking server at {server.url} holds a pushed run without its MPS Studio JSON "
                        "(artifacts not served by the server); nothing was pulled.")
    path.write_bytes(server.get_artifact(f"{folder}/{name}"))
    return tagged


def _without_advice(said: str) -> str:
    """An import's sentence without what it tells a user choosing a file ("choose a file ...", "nothing was
    imported"): a pull says its own."""
    words = re.sub(r"[;.]?\s*(?:[Cc]hoose a file|[Nn]othing was imported)[^;]*$", "", said.strip())
    return words.rstrip(" .;")


def _read(server: Server, entry: dict, kind: str, path: Path):
    """The run ("run") or tool result (its kind) a pushed MLflow run carries, read from its JSON artifact and checked
    as an import of that file is; UserError, one sentence, for anything else."""
    from ..history.runfiles import import_json, import_tool_json
    from ..tools.registry import STORED

    if kind != "run" and kind not in STORED:
        raise UserError(f"The tracking server at {server.url} holds a pushed result of kind {printable(kind)[:40]!r}, "
                        "which this MPS Studio does not keep (update MPS Studio); nothing was pulled.")
    path = path / (mlflow_run.RUN_FILE if kind == "run" else mlflow_run.TOOL_FILE)
    tagged = _fetch(server, entry, path.name, path)
    what = f"run {printable(tagged)[:40]}" if kind == "run" else f"the {kind} result {printable(tagged)[:40]}"
    try:
        found = import_json(path) if kind == "run" else [import_tool_json(path)]
    except UserError as exc:
        raise UserError(f"The tracking server at {server.url} gave {what} as JSON that is not an export of it "
                        f"({_without_advice(str(exc))}); nothing was pulled.") from None
    if len(found) != 1 or found[0].id != tagged or (kind != "run" and getattr(found[0], "kind", None) != kind):
        raise UserError(f"The tracking server at {server.url} gave {what} as JSON of another "
                        f"{'run' if kind == 'run' else 'result'}; nothing was pulled.")
    return found[0]
