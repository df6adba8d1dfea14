"""Regenerate the measured table of docs/broken-installs.md from the recorded fixture
(tests/fixtures/installs/broken_installs_recorded.json):  python -m tools.broken_installs_doc"""

from __future__ import annotations

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "installs" / "broken_installs_recorded.json"
DOC = ROOT / "docs" / "broken-installs.md"
BEGIN, END = "<!-- measured table: begin -->", "<!-- measured table: end -->"


def _short(text: str) -> str:
    text = re.sub(r"/tmp/w34/views/[^/]+/lib/python3\.\d+/site-packages/", ".../", text)
    return re.sub(r"system path \[.*\]$", "system path [...]", text) or "(imports)"


def table() -> str:
    data = json.loads(FIXTURE.read_text())
    rows = ["| torch | case | `import torch` raises (real) | cudafix predicts | finding (kind, wheel, fix spec) |",
            "| --- | --- | --- | --- | --- |"]
    for c in data["cases"]:
        what = "drop %s" % ", ".join(c["drop"]) if c["drop"] else ""
        what += "; ".join("%s -> %s %s" % tuple(r) for r in c["replace"]) or ("" if what else "complete")
        same = "same" if c["predicted"] == c["real"] else _short(c["predicted"])
        br = "; ".join("%s %s `%s`" % (k, w, spec) for k, w, spec, _i in c["breaks"][:2]) + (" ..." if len(c["breaks"]) > 2 else "")
        rows.append("| %s | %s | %s | %s | %s |" % (c["torch"], what.replace("*", "all nvidia-*"), "`%s`" % _short(c["real"]) if c["real"] else "(imports)",
                                                 same, br or "none"))
    return "\n".join(rows)


def main() -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    DOC.write_text(head + BEGIN + "\n" + table() + "\n" + END + tail)


if __name__ == "__main__":
    main()
