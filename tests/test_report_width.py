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


def _list_entries(snap: Snapshot) -> list:
    """Every entry of a list the report wraps, as it prints it: one entry must never be split over
    two lines (issue 35: "nvidia-cuda-runtime-cu12\n12.4.127" reads as two packages)."""
    out = ["%s %s" % (w.name, w.version) for w in snap.toolkits.nvidia_wheels]
    out += ["%s %s" % (p.name, p.version) + (" (%s)" % p.build if p.build else "") for p in snap.toolkits.conda_packages]
    out += list(snap.libraries.ld_library_path)
    for t in snap.toolkits.toolkits:
        out += list(t.sources)
    return [e for e in out if e and " " in e]  # a one-word entry cannot be split at a space


def _ext_entries(snap: Snapshot) -> list:
    """The runtimes of the Extension modules lines ("CUDA 13", "static runtime"): checked in that
    section only (elsewhere "CUDA 13.0" is prose, wrapped at any space)."""
    out = []
    for m in snap.extensions.modules:
        if m.cudart_linkage == "shared" and m.cudart:
            out.append("CUDA %s" % m.cudart)
        elif m.cudart_linkage == "static":
            out.append("static runtime")
    return out


def _splits(lines: list, entries: list) -> set:
    return {"%s | %s" % (a, b) for a, b in zip(lines, lines[1:]) for e in entries
            for k in range(1, len(e.split(" ")))
            if a.endswith(" ".join(e.split(" ")[:k])) and b.startswith(" ".join(e.split(" ")[k:]))}


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: str(p.relative_to(REPO)))
def test_wrapped_lists_break_between_entries(path: pathlib.Path):
    from cudafix.render.text import printable

    snap = Snapshot.load(str(path))
    entries = [printable(e) for e in _list_entries(snap)]
    runner = CliRunner()
    for args in (["status"], ["status", "-v"]):
        res = runner.invoke(cli.main, args + ["--from", str(path)])
        raw = [ANSI.sub("", ln) for ln in res.stdout.splitlines()]
        lines = [ln.strip().rstrip(",;") for ln in raw]
        split = _splits(lines, entries)
        if "Extension modules" in raw:
            start = raw.index("Extension modules")
            end = next((i for i in range(start + 1, len(raw)) if raw[i] and not raw[i].startswith(" ")), len(raw))
            split |= _splits(lines[start:end], [printable(e) for e in _ext_entries(snap)])
        assert sorted(split) == [], (args, path.name, split)
