"""Issue 35: every doc that shows cudafix output is generated from cudafix (tools/doc_outputs.py),
and this fails when a doc and the output of its command differ."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tools import doc_outputs

FENCE = re.compile(r"(?P<marks>(?:<!-- (?:setup|run): .*? -->\n)*)```[a-z]*\n(?P<body>.*?)```\n", re.S)


def test_every_generated_block_is_what_its_command_prints():
    stale = doc_outputs.check()
    assert stale == [], "run python -m tools.doc_outputs: %s" % stale


def test_every_block_showing_cudafix_output_is_generated():
    """A fenced block that shows a cudafix command with output (a `$ cudafix ...` line followed by
    more lines) carries a `<!-- run: -->` marker, so it can only be what cudafix prints."""
    handwritten = []
    for name in doc_outputs.docs():
        text = (REPO / name).read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            lines = m.group("body").splitlines()
            shows_output = any(ln.startswith("$ cudafix") and i + 1 < len(lines) and not lines[i + 1].startswith("$ ")
                               for i, ln in enumerate(lines))
            if shows_output and "<!-- run: " not in m.group("marks"):
                handwritten.append("%s: %s" % (name, lines[0][:80]))
    assert handwritten == []
