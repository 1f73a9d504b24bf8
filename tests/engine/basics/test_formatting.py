"""One implementation of each way to say a number, a column or a file write (shared by CLI, window, CSV)."""

from __future__ import annotations

import pytest

from mpsstudio.engine.history import columns
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.files import atomic_path, write_atomic
from mpsstudio.engine.basics.formatting import error_line, fmt_bytes, fmt_count, fmt_duration, one_line, plural
from mpsstudio.engine.basics.results import RunResult


@pytest.mark.parametrize("seconds, text", [
    (0.844, "0.84 s"), (12.34, "12.3 s"), (500, "8 min 20 s"), (3900, "1 h 05 min"), (None, "\u2014"), (-1, "\u2014"),
])
def test_durations(seconds, text):
    assert fmt_duration(seconds) == text


@pytest.mark.parametrize("n, text", [
    (831_626, "831,626"), (1_462_538, "1.46 M"), (11_689_512, "11.7 M"), (134_268_738, "134 M"),
    (1_200_000_000, "1.20 B"),
])
def test_counts(n, text):
    assert fmt_count(n) == text


def test_bytes_are_iec_and_plurals_can_be_irregular():
    assert fmt_bytes(83 * 1024**2) == "83.0 MiB" and fmt_bytes(1.5 * 1024**3) == "1.5 GiB"
    assert plural(1, "class", "classes") == "1 class" and plural(3, "class", "classes") == "3 classes"


def test_an_error_is_one_line_cut_short():
    assert one_line("a\n  b\tc") == "a b c"
    assert len(one_line("x" * 1000, 50)) == 50 and one_line("x" * 1000, 50).endswith("\u2026")
    assert error_line(ValueError("bad\nshape")) == "ValueError: bad shape"
    assert error_line(KeyError()) == "KeyError"


def test_every_view_takes_its_columns_from_one_list():
    from mpsstudio import cli

    run = RunResult(RunConfig(), summary={"samples_per_s": 1234.5, "samples_per_s_iqr": 10.0, "peak_memory": 2**20})
    header = cli.format_table([run]).splitlines()[0].split("  ")
    titles = [columns.BY_KEY[k].title for k in columns.CLI_BENCH_COLUMNS]
    assert [h.strip() for h in header if h.strip()] == titles
    assert columns.cell_text("peak_memory_bytes", run, {}) == "1.0 MiB"
    assert columns.cell_text("samples_per_s", run, {}) == "1,234"
    assert set(columns.CLI_BENCH_COLUMNS) | set(columns.TABLE_COLUMNS) <= set(columns.CSV_COLUMNS)


def test_the_window_table_uses_the_engine_columns():
    pytest.importorskip("PySide6")
    from mpsstudio.gui.results.run_table import COLUMNS

    engine = [c for c in COLUMNS if c.key in columns.BY_KEY]  # beside them: the state and comparison badges
    assert [c.key for c in engine] == [*columns.TABLE_COLUMNS, "note"]
    assert [c.header for c in engine] == [columns.BY_KEY[k].title for k in (*columns.TABLE_COLUMNS, "note")]
    assert [c.key for c in COLUMNS if c.key not in columns.BY_KEY] == ["state", "comparison"]


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "runs.json"
    write_atomic(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as part:
            part.write_text("half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.json"]


def test_an_atomic_write_never_replaces_a_folder_or_a_device_and_gives_a_new_file_the_usual_mode(tmp_path):
    import os
    import stat

    (tmp_path / "folder").mkdir()
    for dest in (tmp_path / "folder", "/dev/null"):
        with pytest.raises(OSError, match="folder|not a regular file"):
            write_atomic(dest, "x")
    assert (tmp_path / "folder").is_dir() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    mask = os.umask(0o022)
    os.umask(mask)
    write_atomic(tmp_path / "new.csv", "a")
    assert stat.S_IMODE(os.stat(tmp_path / "new.csv").st_mode) == 0o666 & ~mask  # not mkstemp's 0600
    os.chmod(tmp_path / "new.csv", 0o640)
    write_atomic(tmp_path / "new.csv", "b")  # a file replaced keeps its mode
    assert stat.S_IMODE(os.stat(tmp_path / "new.csv").st_mode) == 0o640


def test_ratios_keep_the_digit_that_decides_no_clear_difference():
    from mpsstudio.engine.basics.formatting import fmt_ratio

    assert fmt_ratio(0.996) == "0.996" and fmt_ratio(1.004) == "1.004" and fmt_ratio(1.0) == "1.00"
    assert fmt_ratio(3.017) == "3.02" and fmt_ratio(48.46) == "48.5" and fmt_ratio(1210.4) == "1,210"
    assert fmt_ratio(3.17, two_decimals_below=2) == "3.2"


def test_a_spread_past_its_limit_never_reads_as_the_limit():
    from mpsstudio.engine.basics.formatting import fmt_beyond

    assert fmt_beyond(0.054, 0.05) == "±5.4 %"  # whole percents would say "±5 % ... beyond the ±5 % limit"
    assert fmt_beyond(0.09, 0.05) == "±9 %" and fmt_beyond(0.05, 0.05) == "±5 %" and fmt_beyond(0.03, 0.05) == "±3 %"
