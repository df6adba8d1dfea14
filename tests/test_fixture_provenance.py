"""Every fixture says what it is: recorded (machine, date, command), transcribed (public source) or
synthetic (generator) -- in its folder's SOURCES.md, and in a JSON file's ``_fixture`` key too.

Raw recordings (command output kept byte for byte) are labelled only in SOURCES.md.  A hand-written
file is never called recorded.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
KINDS = {"recorded", "recorded (raw)", "transcribed", "synthetic", "generator", "tool"}
NOT_FIXTURES = {"SOURCES.md", "README.md", "__pycache__"}
ROW = re.compile(r"^\|\s*`([^`]+)`(?:\s*\([^|]*\))?\s*\|\s*([^|]+?)\s*\|\s*(.+?)\s*\|\s*$")


def _expand(pattern: str):
    """'a-{x,y}-{1,2}.json' -> the four names (the yolov9 table lists its 16 files that way)."""
    m = re.search(r"\{([^{}]+)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out += _expand(pattern[:m.start()] + alt + pattern[m.end():])
    return out


def table(folder: pathlib.Path):
    """{name: (kind, source)} from folder/SOURCES.md."""
    rows = {}
    for line in (folder / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if not m:
            continue
        for name in _expand(m.group(1)):
            assert name not in rows, "%s listed twice in %s/SOURCES.md" % (name, folder.name)
            rows[name] = (m.group(2), m.group(3))
    return rows


def folders():
    return sorted({p.parent for p in FIXTURES.rglob("*") if p.is_file() and "__pycache__" not in p.parts})


@pytest.mark.parametrize("folder", folders(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_file_is_listed_with_its_kind(folder):
    assert (folder / "SOURCES.md").is_file(), "%s has no SOURCES.md" % folder
    rows = table(folder)
    present = {p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if p.name not in NOT_FIXTURES}
    assert sorted(present) == sorted(rows), "SOURCES.md of %s lists %s" % (folder.name, sorted(set(rows) ^ present))
    for name, (kind, source) in rows.items():
        assert kind in KINDS, (name, kind)
        assert len(source) > 15, (name, source)
        if name.endswith("/"):
            assert (folder / name / "SOURCES.md").is_file(), name


def _json_fixtures():
    out = []
    for folder in folders():
        rows = table(folder)
        for p in sorted(folder.glob("*.json")):
            kind = rows.get(p.name, ("?", ""))[0]
            if kind == "recorded (raw)":
                continue  # byte for byte what the command printed (h200/cuda_version.json is not even JSON)
            out.append((p, kind))
    return out


@pytest.mark.parametrize("path,kind", _json_fixtures(), ids=lambda v: v.name if isinstance(v, pathlib.Path) else v)
def test_json_fixture_carries_the_same_label(path, kind):
    data = json.loads(path.read_text(encoding="utf-8"))
    fx = data.get("_fixture")
    assert isinstance(fx, dict), "%s: no _fixture key" % path
    assert fx["kind"] == kind
    if kind == "recorded":
        assert fx.get("machine") and re.match(r"^\d{4}-\d\d-\d\d$", fx.get("date", "")) and fx.get("command"), fx
    elif kind == "transcribed":
        urls = fx.get("url") or []
        assert all(u.startswith("https://") for u in urls) and (urls or fx.get("where")), fx
    elif kind == "synthetic":
        assert fx.get("generator"), fx


@pytest.mark.parametrize("path,kind", _json_fixtures(), ids=lambda v: v.name if isinstance(v, pathlib.Path) else v)
def test_a_hand_written_file_is_never_called_recorded(path, kind):
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema") != "cudafix.snapshot/1":
        return
    hand = data.get("cudafix_version") in ("fixture", "transcribed") or data.get("created", "").endswith("T00:00:00Z")
    says_recorded = re.match(r"\s*(recorded|measured|the .* as measured)", data.get("source", ""), re.I) is not None
    if kind == "recorded":
        assert not hand, "%s: labelled recorded but written by hand" % path
    else:
        assert not says_recorded, "%s: its source claims a recording: %s" % (path, data["source"][:120])
