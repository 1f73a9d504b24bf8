"""Reports to paste and to send (`mpsstudio report`, engine/report): Markdown that renders as tables, one HTML file
that needs nothing from the network, for every tool result kind, runs and their comparisons; no path, user or host
name in them; bad input in one sentence."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from mpsstudio import cli
from mpsstudio.engine.report import Chart, scrub, secrets
from mpsstudio.engine.report.svg import chart_svg
from tests.support.runs import noisy_rates, run_with
from tests.support.paths import DATA

CORPUS = DATA / "tool_results"
KINDS = sorted(p.stem for p in CORPUS.glob("*.json"))
PATHS = re.compile(r"(/Users/|/home/|/tmp/|/private/|[A-Z]:\\\\)")


def rendered_markdown(text: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.fetches: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") or (name == "xmlns" and tag != "svg"):
                self.fetches.append(f"{tag} {name}={value}")


@pytest.mark.parametrize("kind", KINDS)
def test_every_tool_result_kind_as_markdown_and_html(kind, tmp_path, capsys):
    source = CORPUS / f"{kind}.json"
    assert cli.main(["report", str(source)]) == 0
    md = capsys.readouterr().out
    html_of_md = rendered_markdown(md)
    assert "<table>" in html_of_md and "<th" in html_of_md  # GitHub-flavoured tables, not text
    assert not PATHS.search(md), PATHS.search(md)
    out = tmp_path / "r.html"
    assert cli.main(["report", str(source), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    tags = Tags()
    tags.feed(page)
    assert tags.fetches == [] and "script" not in tags.tags  # opens offline: nothing to fetch, nothing to run
    assert "table" in tags.tags and page.startswith("<!DOCTYPE html>")
    if kind in ("sweep", "tune", "max-batch", "diagnose"):
        assert "svg" in tags.tags
    assert not PATHS.search(page)


def test_a_run_report_holds_its_comparisons(capsys):
    from mpsstudio.engine.history.store import RunStore

    env = {"machine_label": "Apple M3 Max, macOS 14.5", "chip": "Apple M3 Max", "os": "macOS 14.5", "torch": "2.14.1",
           "hostname": "janes-macbook-pro.local"}
    cpu = run_with("cpu", noisy_rates(1000, 0.02), env=env, created="2026-11-01T10:00:00+00:00")
    mps = run_with("mps", noisy_rates(3000, 0.02, seed=2), env=env, created="2026-11-01T10:01:00+00:00")
    newer = run_with("mps", noisy_rates(2600, 0.02, seed=3), env={**env, "torch": "2.15.0"},
                     created="2026-11-02T10:00:00+00:00")
    store = RunStore()
    for r in (cpu, mps, newer):
        store.save(r)
    assert cli.main(["report", cpu.id[:8], mps.id]) == 0  # its device comparison, and the environments of mps
    md = capsys.readouterr().out
    assert "Devices compared" in md and "environments compared" in md
    assert "torch 2.15.0 is 13 % slower [" in md or "torch 2.15.0 is 1" in md
    assert "<details><summary>Environment</summary>" in md
    assert "janes-macbook-pro" not in md and "janes" not in md
    assert md.count("<table>") == 0 and rendered_markdown(md).count("<table>") >= 3
    assert cli.main(["report", "latest", "--format", "html"]) == 0
    assert "<svg" in capsys.readouterr().out


def test_paths_user_and_host_are_scrubbed(monkeypatch):
    monkeypatch.setenv("HOME", "/Users/jane")
    monkeypatch.setattr("getpass.getuser", lambda: "jane")
    hidden = secrets(["janes-mbp.local"])
    text = ("Exported /Users/jane/models/net.py to /Users/jane/out/m.pt on janes-mbp, C:\\Users\\jane\\x.py; "
            "3 samples/s, ratio 1.2x [1.0-1.4], jane's run")
    out = scrub(text, hidden)
    assert "jane" not in out and "/Users" not in out and "janes-mbp" not in out and "C:" not in out
    assert "net.py" in out and "m.pt" in out and "samples/s" in out and "[1.0-1.4]" in out


def test_a_host_named_like_a_common_word_leaves_sentences_whole():
    """A machine whose host name is "vm" (this build machine's) kept "this Linux VM" from reading "this Linux a host"."""
    sentence = "not measured: no energy counter readable on this Linux VM (/sys/class/powercap is missing)"
    assert scrub(sentence, secrets(["vm"])) == sentence.replace("/sys/class/powercap", "powercap")
    assert "a host" in scrub("ran on bigbox-7", secrets(["bigbox-7"]))


def test_chart_svg_is_plain_and_escaped():
    svg = chart_svg(Chart(["<b>x</b>", "y"], [2.0, None], "ratio (\u00d7)", [1.5, None], [2.5, None], 1.0, ["", ""]))
    assert svg.startswith("<svg") and "&lt;b&gt;" in svg and "not measured" in svg and "stroke-dasharray" in svg


@pytest.mark.parametrize("args, words", [
    (["nothing-like-this"], "No run with id nothing-like-this"),
    (["missing.json"], "No file missing.json"),
    (["BAD"], "is not valid JSON"),
    (["latest"], "holds no run or tool result yet"),
    ([str(CORPUS / "sweep.json"), "--out", "/nonexistent-folder/r.html"], "--out"),
])
def test_bad_input_is_one_sentence(tmp_path, monkeypatch, capsys, args, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD").write_text("{oops")
    assert cli.main(["report", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless Chromium (Debian's package)")
def test_the_html_renders_in_headless_chromium(tmp_path):
    out = tmp_path / "tune.html"
    assert cli.main(["report", str(CORPUS / "tune.json"), "--out", str(out)]) == 0
    png = tmp_path / "tune.png"
    done = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1000,800", f"--screenshot={png}", out.as_uri()], capture_output=True,
                          timeout=120, check=False)
    assert png.exists(), done.stderr[-2000:]
    from PySide6.QtGui import QImage

    image = QImage(str(png))
    assert image.width() == 1000
    colours = {image.pixelColor(x, y).name() for x in range(0, 1000, 25) for y in range(0, 800, 25)}
    assert "#0a84ff" in colours or len(colours) > 4  # the bars and the text drew, not a blank page


def test_an_output_never_destroys_the_history_or_an_input(tmp_path, monkeypatch, capsys):
    from mpsstudio.engine.basics.paths import data_dir
    from mpsstudio.engine.history.store import RunStore

    run = run_with("cpu", noisy_rates(1000, 0.02))
    RunStore().save(run)
    history = data_dir() / "runs.sqlite3"
    before = history.read_bytes()
    source = tmp_path / "in.json"
    source.write_text((CORPUS / "sweep.json").read_text())
    link = tmp_path / "link.md"
    target = tmp_path / "real.md"
    target.write_text("old")
    link.symlink_to(target)
    for args in (["report", run.id, "--out", str(history)], ["report", str(source), "--out", str(source)],
                 ["history", "--json", str(history)], ["history", "--steps", run.id[:8], str(history) + "-wal"]):
        assert cli.main(args) == 2, args
        err = capsys.readouterr().err
        assert ("run history's own file" in err or "also a file this command reads" in err) and len(
            err.strip().splitlines()) == 1
    assert history.read_bytes()[:100] == before[:100] and source.read_text() == (CORPUS / "sweep.json").read_text()
    assert cli.main(["report", str(source), "--out", str(link)]) == 0  # through the link, which stays a link
    assert link.is_symlink() and "Batch-size sweep" in target.read_text()


def test_hostile_fields_in_a_report(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.setattr("getpass.getuser", lambda: "sam")
    run = run_with("cpu", noisy_rates(1000, 0.02), env={"machine_label": "box", "hostname": ["not", "text"]})
    from mpsstudio.engine.history.runfiles import export_json

    export_json([run], tmp_path / "runs.json")
    assert cli.main(["report", str(tmp_path / "runs.json")]) == 0  # a host name that is not text: ignored
    assert "samples/s" in capsys.readouterr().out  # "sam" is hidden as a word, never inside one
    doc = json.loads((CORPUS / "export.json").read_text())
    doc["sentence"] = "Wrote [/Users/ann/x.pt] and `*bold*` [a](javascript:alert(1)) \x1b[31m <script>"
    (tmp_path / "t.json").write_text(json.dumps(doc))
    assert cli.main(["report", str(tmp_path / "t.json")]) == 0
    md = capsys.readouterr().out
    assert "/Users/ann" not in md and "\x1b" not in md and "<script>" not in md
    assert "\\*bold\\*" in md and "\\](javascript" in md
    assert "<em>" not in rendered_markdown(md) and "<a href" not in rendered_markdown(md)
    (tmp_path / "empty.json").write_text(json.dumps({"format": "mpsstudio.runs", "version": 1, "runs": []}))
    assert cli.main(["report", str(tmp_path / "empty.json")]) == 2
    assert "holds no runs" in capsys.readouterr().err


def test_a_diagnosis_with_layers_reports_its_layer_table():
    """The report read the layer rows under a key the result never had ("layers" inside "layers"), so a diagnosis
    with --layers was reported without its table; the typed record (records/diagnose.Layers) reads `rows`."""
    import json
    from pathlib import Path

    from mpsstudio.engine.report.parts import tool_part
    from mpsstudio.engine.tools import registry

    raw = json.loads((Path(__file__).parents[2] / "data" / "tool_results" / "diagnose.json").read_text())
    body = {k: v for k, v in raw.items() if k not in ("kind", "id", "created_at")}
    part = tool_part("diagnose", registry.checked("diagnose", body))
    assert [t.headers[0] for t in part.tables] == ["device", "module"]
    rows = part.tables[1].rows
    assert len(rows) == len(body["devices"][0]["layers"]["rows"][:60]) and rows[0][0]
    assert part.chart is not None and part.chart.unit.startswith("ms per step on cpu")
