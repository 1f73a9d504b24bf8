"""CLI tables fit the terminal's width: the columns that do not fit move to a further block, led by the first
column; `--wide` and a pipe keep one line a row (what a script reading the output expects)."""

from __future__ import annotations

import sys

import pytest

from mpsstudio import cli
from mpsstudio.cli import common
from mpsstudio.engine.basics.formatting import Table

HEADERS = ["device", "samples/s", "±", "stability", "speedup", "note"]
ROWS = [["cpu", "1,234", "±3 %", "stable", "-", "a"], ["cuda:0", "98,765", "±1 %", "stable", "80.0x", "b"]]
NUMERIC = [False, True, True, False, True, False]


def test_a_table_wider_than_the_terminal_is_split_into_blocks_led_by_the_first_column():
    table = common.grid(Table(HEADERS, ROWS, NUMERIC), width=34)
    assert all(len(line) <= 34 for line in table.splitlines())
    blocks = table.split("\n\n")
    assert len(blocks) >= 2
    assert all(block.startswith("device") and "cuda:0" in block for block in blocks)
    for header in HEADERS:  # every column is somewhere, once
        assert sum(block.splitlines()[0].split().count(header) for block in blocks) == (len(blocks) if header ==
                                                                                        "device" else 1)
    assert "98,765" in table and "80.0x" in table


def test_a_table_that_fits_is_one_block_and_a_too_wide_description_is_not_cut():
    assert "\n\n" not in common.grid(Table(HEADERS, ROWS, NUMERIC), width=200)
    long = [["cpu", "x", "a description " * 12]]
    table = common.grid(Table(["device", "kind", "description"], long, [False] * 3), width=40)
    assert "\n\n" not in table and "a description " * 11 in table


@pytest.mark.parametrize("tty, wide, limited", [(True, False, True), (True, True, False), (False, False, False)])
def test_the_terminal_sets_the_width_unless_wide_or_piped(monkeypatch, tty, wide, limited):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty, raising=False)
    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.setattr(common, "TABLE_WIDTH", None)
    common.fit_tables_to_terminal(wide)
    assert common.TABLE_WIDTH == (50 if limited else None)


def test_wide_is_an_option_of_every_command(capsys, monkeypatch):
    monkeypatch.setattr(common, "TABLE_WIDTH", None)
    assert cli.main(["datasets", "--wide"]) == cli.EXIT_OK
    assert "cifar10" in capsys.readouterr().out
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert all(any("--wide" in a.option_strings for a in sub._actions) for sub in commands.values())
