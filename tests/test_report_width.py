"""The text report fits 80 columns (issue 27, point 6): `status`, `check`, `fix` and `explain`
as the CLI prints them, for every snapshot fixture in the repository and every rule.

A line may run over only where it cannot be broken without breaking what it holds: one path,
URL or other unbroken token (with nothing but its label or bullet before it), a shell command
line (`$ ...` or a plan step `N. $ ...`, it must paste as one command), and explain's verbatim quotes (the exact error
texts users search for, and the sources)."""

from __future__ import annotations

import pathlib
import re

import pytest
from click.testing import CliRunner

from cudafix import cli, rules
from cudafix.model.snapshot import Snapshot
from tests.conftest import REPO

WIDTH = 80
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _snapshots():
    out = []
    for p in sorted(list((REPO / "tests" / "fixtures").rglob("*.json")) + list((REPO / "cudafix" / "data" / "examples").glob("*.json"))):
        try:
            Snapshot.load(str(p))
        except Exception:  # not a snapshot (a recorded plan, a table, ...)
            continue
        out.append(p)
    return out


SNAPSHOTS = _snapshots()


def overflows(text: str, verbatim=()) -> list:
    bad = []
    for line in text.splitlines():
        plain = ANSI.sub("", line)
        if len(plain) <= WIDTH or re.match(r"\s*(\d+\.\s+)?\$ ", plain) or plain.strip() in verbatim:
            continue
        longest = max(plain.split(), key=len)
        rest = plain.replace(longest, "", 1).rstrip()
        if re.search(r"[/.:=_]", longest) and len(rest) <= WIDTH // 2:
            continue  # an unbreakable token after its label or bullet
        bad.append("%d: %s" % (len(plain), plain))
    return bad


def test_there_are_snapshots_to_check():
    assert len(SNAPSHOTS) >= 30, SNAPSHOTS


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: str(p.relative_to(REPO)))
def test_status_check_and_fix_fit_80_columns(path: pathlib.Path):
    runner = CliRunner()
    for args in (["status"], ["status", "-v"], ["check"], ["check", "--strict"], ["fix"]):
        res = runner.invoke(cli.main, args + ["--from", str(path)])
        assert res.exit_code in (0, 1), (args, res.output[-2000:])
        assert res.stdout.strip(), args
        assert overflows(res.stdout) == [], (args, path.name)


def test_explain_fits_80_columns_for_every_rule():
    from cudafix.fleet.checks import FLEET_RULES

    runner = CliRunner()
    listing = runner.invoke(cli.main, ["explain", "--list"])
    assert listing.exit_code == 0 and overflows(listing.stdout) == []
    for rule in tuple(rules.REGISTRY) + FLEET_RULES:
        res = runner.invoke(cli.main, ["explain", rule.id])
        assert res.exit_code == 0, res.output
        verbatim = {s.strip() for s in rule.symptoms} | {("- " + s).strip() for s in rule.sources}
        assert overflows(res.stdout, verbatim) == [], rule.id


def test_wrapping_keeps_every_word_in_order():
    from cudafix.render.text import fit_lines

    line = "  error   rule-x [s]: " + " ".join("word%d" % i for i in range(60)) + " /a/very/long/path/" + "x" * 90
    out = fit_lines([line])
    assert len(out) > 2 and all(len(ln) <= WIDTH for ln in out if "/a/very" not in ln)
    assert " ".join(" ".join(out).split()) == " ".join(line.split())
    assert all(ln.startswith(" " * 10) for ln in out[1:])  # hanging indent under the message
