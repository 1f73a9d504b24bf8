"""Runs and tool results pushed to a team's MLflow tracking server, each exactly once in its experiment, nothing lost
while it is down.

A push first asks the server whether it answers as MLflow does (answers: an address that does not is said before
anything waits), queues the chosen runs and tool results in the history (history/queue.py), then sends what waits
for that server, in order: the experiment found by name or created; the MLflow run found by its MPS Studio id tag,
or created with it; its params, metrics and tags in batches within the REST API's limits (log-batch: 1,000 metrics,
100 params, 100 tags a call); its JSON (what a pull reads) and its report as artifacts; then DONE_TAG, last. A push
cut off anywhere (the server killed, the network gone) leaves the item queued; the next one finds the MLflow run by
its tag and logs the same values again, which MLflow keeps once (the same metric at the same timestamp and step; a
param given its own value again), so every item ends on the server exactly once. One already marked done is not sent
again."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..basics.errors import UserError
from ..basics.formatting import printable, runs_and_results
from . import mlflow_run, mlflow_tool
from .answers import artifact_folder, object_in, tag_of, text_in
from .server import Refused, Server, Unreachable

MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100  # per log-batch call (MLflow's REST API)


@dataclass
class Pushed:
    """What a push did: runs sent, runs the server already had, and those that still wait (id, why)."""

    url: str
    sent: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    waiting: list[tuple[str, str]] = field(default_factory=list)

    tools: set[str] = field(default_factory=set)  # the ids that are tool results (the rest are runs)

    def sentence(self) -> str:
        parts = []
        if self.sent:
            parts.append(f"pushed {self._count(self.sent)} to {self.url}")
        if self.already:
            parts.append(f"{self._count(self.already)} already there" if self.sent else
                         f"{self._count(self.already)} already on {self.url} (nothing sent again)")
        if self.waiting:
            n = len(self.waiting)
            parts.append(f"{self._count([i for i, _ in self.waiting])} wait{'s' if n == 1 else ''} for the team's "
                         f"server ({self.waiting[0][1]}); `mpsstudio history --push {self.url}` sends "
                         f"{'it' if n == 1 else 'them'} when it answers")
        said = "; ".join(parts)
        return f"{said[:1].upper()}{said[1:]}." if parts else f"Nothing waits for {self.url}."

    def _count(self, ids: list[str]) -> str:
        tools = sum(1 for i in ids if i in self.tools)
        return runs_and_results(len(ids) - tools, tools)


def push(store, url: str, ids: list[str], experiment: str = "", server: Server | None = None,
         progress=None) -> Pushed:
    """Queue `ids` (runs and tool results) for the server at `url` (checked first: UserError naming an id the
    history lacks) and send everything that waits for it. UserError for what the server refuses outright (the
    credentials, an answer that is not MLflow's); a server that does not answer leaves them queued
    (Pushed.waiting)."""
    server = server or Server(url)
    if ids:
        ids = check_ids(store, ids)
        if experiment:
            check_experiment(experiment)
        answers(server)  # an address that is not MLflow's (a typo, a redirect, refused credentials): nothing queued
        store.queue.add(server.url, list(dict.fromkeys(ids)), experiment)
    queued = store.queue.waiting(server.url)
    report = Pushed(server.url, tools={w.run_id for w in queued if store.tool_kind(w.run_id)})
    try:
        _send_queued(store, server, queued, report, progress)
    except UserError as exc:  # refused outright mid-push (credentials now refused, a deleted experiment): said
        left = [w.run_id for w in store.queue.waiting(server.url)]
        if not left:
            raise
        tools = sum(1 for i in left if i in report.tools)
        raise UserError(f"{str(exc).rstrip('.')}; {runs_and_results(len(left) - tools, tools)} "
                        f"wait{'s' if len(left) == 1 else ''} in the history for the next push.") from None
    return report


def _send_queued(store, server: Server, queued: list, report: Pushed, progress) -> None:
    for n, entry in enumerate(queued):
        item = _outgoing(store, entry.run_id)
        if item is None:  # deleted from the history since it was queued: nothing to send
            store.queue.done(server.url, entry.run_id)
            continue
        if progress is not None:
            progress(f"pushing {entry.run_id[:8]} ({n + 1} of {len(queued)})")
        try:
            sent = push_one(server, item, entry.experiment or item.experiment)
        except Unreachable as exc:
            store.queue.failed(server.url, entry.run_id, str(exc))
            report.waiting += [(w.run_id, str(exc)) for w in store.queue.waiting(server.url)
                               if w.run_id not in report.sent + report.already]
            return
        except Refused as exc:  # this run's request refused (a param the server holds otherwise): it waits, said
            store.queue.failed(server.url, entry.run_id, str(exc))
            report.waiting.append((entry.run_id, str(exc).rstrip(".")))
            continue
        store.queue.done(server.url, entry.run_id)
        (report.sent if sent else report.already).append(entry.run_id)


def answers(server: Server) -> None:
    """UserError, one sentence, where the address answers but not as an MLflow tracking server does (a wrong path,
    a redirect, a web page) or refuses the credentials; a server that does not answer at all passes (what is pushed
    then waits for it)."""
    try:
        server.call("POST", "experiments/search", {"max_results": 1})
    except Unreachable:
        return
    except Refused as exc:
        raise UserError(f"The address {server.url} does not answer as an MLflow tracking server does "
                        f"({str(exc).split(' (', 1)[-1].rstrip('.)')}); check it: MLflow's REST API is under "
                        "/api/2.0/mlflow/ of the address `mlflow server` prints.") from None


def check_experiment(name: str) -> None:
    """UserError for an experiment name MLflow would refuse or a terminal would garble."""
    text = str(name)
    if not text.strip() or len(text) > 250 or not text.isprintable():
        raise UserError(f"{printable(text)[:60]!r}{'…' if len(text) > 60 else ''} is not an experiment name to push "
                        "to; give one line of at most 250 characters.")


def everything(store) -> list[str]:
    """Every run's id and every tool result's that can be shown (what `history --push URL` sends)."""
    return [r.id for r in store.summaries()] + [t.id for t in store.tools() if not t.problem]


def check_ids(store, ids: list[str]) -> list[str]:
    """The whole ids of these runs and tool results (an id, or a unique start of one of at least 8 characters, as
    the progress lines show them); UserError naming the first that is neither a run of the history nor a tool
    result it can show."""
    runs = [r.id for r in store.summaries()]  # summaries: each run is read whole once, when it is sent
    tools = [t.id for t in store.tools()]
    whole = []
    for i in ids:
        text = str(i)
        found = [k for k in runs + tools if k == text] or (
            [k for k in runs + tools if k.startswith(text)] if len(text) >= 8 else [])
        if len(found) > 1:
            raise UserError(f"{printable(text)[:40]} starts more than one run or tool result; give more of its id.")
        if not found:
            raise UserError(f"No run or tool result {printable(text)[:40]} in the history; `mpsstudio history` lists "
                            "the run ids, `mpsstudio history --tools` the tool results'.")
        ident = found[0]
        if ident not in runs:
            record = store.tool(ident)
            if record is None or record.problem:
                raise UserError(f"The {store.tool_kind(ident)} result {ident} cannot be pushed: "
                                f"{(record.problem if record else 'it cannot be read').rstrip('.')}.")
        whole.append(ident)
    return whole


def _outgoing(store, ident: str) -> mlflow_run.Outgoing | None:
    run = store.get(ident)
    if run is not None:
        return mlflow_run.outgoing(run)
    record = store.tool(ident)
    return mlflow_tool.outgoing(record) if record is not None and not record.problem else None


def experiment_id(server: Server, name: str) -> str:
    """The id of the experiment of that name, created where there is none (another machine creating it at the same
    time: found again)."""
    for attempt in range(2):
        try:
            found = object_in(server.call("GET", "experiments/get-by-name", query={"experiment_name": name}),
                              "experiment", server)
            if found.get("lifecycle_stage") == "deleted":
                raise UserError(f"The experiment {printable(name)[:200]!r} on {server.url} was deleted in MLflow; "
                                "restore it there, or push with --experiment NAME to another")
            return text_in(found, "experiment_id", server)
        except Refused as exc:
            if exc.code != "RESOURCE_DOES_NOT_EXIST":
                raise
        try:
            return text_in(server.call("POST", "experiments/create", {"name": name}), "experiment_id", server)
        except Refused as exc:
            if exc.code != "RESOURCE_ALREADY_EXISTS" or attempt:
                raise
    raise UserError(f"The tracking server at {server.url} neither found nor created the experiment {name!r}.")


def find_run(server: Server, exp: str, run_id: str) -> dict | None:
    """The MLflow run tagged with this MPS Studio run id ({"info", "data"}), None where there is none. Where two
    pushes raced and left two, the one a pull reads (pull.once_each: the smallest MLflow run id) is chosen, so no
    third is made."""
    if not run_id or not all(ch.isalnum() or ch in "-_" for ch in run_id):
        raise Refused(f"Run {run_id[:40]!r} has an id MLflow's search cannot quote; it is not pushed.", "")
    answer = server.call("POST", "runs/search", {"experiment_ids": [exp], "max_results": 20,
                                                  "filter": f"tags.`{mlflow_run.RUN_ID_TAG}` = '{run_id}'"})
    runs = answer.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise UserError(f"The tracking server at {server.url} answered a search with runs that are not objects; "
                        "check that the address is an MLflow tracking server.")
    from .pull import once_each

    return once_each(runs)[0] if runs else None


def push_one(server: Server, item: mlflow_run.Outgoing, experiment: str) -> bool:
    """Send one run or tool result; False where the server has it whole already."""
    exp = experiment_id(server, experiment)
    found = find_run(server, exp, item.id)
    if found is not None and tag_of(found, mlflow_run.DONE_TAG) == "1":
        return False
    if found is None:
        created = server.call("POST", "runs/create", {
            "experiment_id": exp, "start_time": mlflow_run.millis(item.created_at),
            "run_name": next((t["value"] for t in item.tags if t["key"] == "mlflow.runName"), item.id),
            "tags": [t for t in item.tags if t["key"] == mlflow_run.RUN_ID_TAG]})
        found = object_in(created, "run", server)
    info = object_in(found, "info", server)
    mlflow_id = text_in(info, "run_id", server)
    for chunk in mlflow_run.batches(item.metrics, MAX_METRICS):
        if chunk:
            server.call("POST", "runs/log-batch", {"run_id": mlflow_id, "metrics": chunk})
    for chunk in mlflow_run.batches(item.params, MAX_PARAMS):
        server.call("POST", "runs/log-batch", {"run_id": mlflow_id, "params": chunk})
    for chunk in mlflow_run.batches(item.tags, MAX_TAGS):
        server.call("POST", "runs/log-batch", {"run_id": mlflow_id, "tags": chunk})
    folder = artifact_folder(info)  # None: not served by the server (a pull then says so), or stepping out of it
    for name, data in item.files.items() if folder is not None else ():
        server.put_artifact(f"{folder}/{name}", data)
    server.call("POST", "runs/update", {"run_id": mlflow_id, "status": "FINISHED" if item.finished else "FAILED",
                                        "end_time": mlflow_run.millis(item.created_at) + 1})
    server.call("POST", "runs/set-tag", {"run_id": mlflow_id, "key": mlflow_run.DONE_TAG, "value": "1"})
    return True
