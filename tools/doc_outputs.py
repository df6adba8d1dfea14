"""Fill every doc's cudafix output blocks with what the commands print (issue 35: a doc that shows
cudafix output is generated from cudafix, and tests/test_doc_outputs.py fails when they differ).

    python -m tools.doc_outputs           # rewrite the blocks in place
    python -m tools.doc_outputs --check   # exit 1 and name the stale blocks

A block is a line ``<!-- run: COMMAND -->`` (optionally preceded by ``<!-- setup: COMMAND -->``,
run first in a private scratch directory, $DOCTMP, and not shown: COMMAND then runs there) followed
by a fenced ``text`` block.  COMMAND runs under bash from the repository root (or $DOCTMP), with
``cudafix`` meaning ``python -m cudafix`` of this checkout (this interpreter; $PYTHON in a
setup), NO_COLOR=1, and the variables of the snapshot named by ``--from`` (what the user's shell has in that env); the fence then holds
``$ COMMAND`` and its stdout+stderr.  The docs searched: README.md and docs/*.md.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BLOCK = re.compile(r"(?:<!-- setup: (?P<setup>.*?) -->\n)?(<!-- run: (?P<cmd>.*?) -->\n)(?P<fence>```text\n.*?```\n)", re.S)


def docs() -> List[str]:
    """Every doc that may hold a block, relative to the repository root."""
    found = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return [d for d in found if os.path.isfile(os.path.join(ROOT, d))]


def _env_for(cmd: str, scratch: str) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "NO_COLOR": "1", "PYTHONPATH": ROOT, "PYTHONIOENCODING": "utf-8", "DOCTMP": scratch}
    m = re.search(r"--from\s+([^\s\"')]+)", cmd)
    if m and os.path.isfile(os.path.join(ROOT, m.group(1))):
        with open(os.path.join(ROOT, m.group(1)), encoding="utf-8") as fh:
            env.update(json.load(fh).get("env", {}))
    return env


def run(cmd: str, setup: str = "") -> str:
    """The fence for ``cmd``: ``$ cmd`` and what it prints."""
    prelude = 'cudafix() { %s -m cudafix "$@"; }\n' % shlex.quote(sys.executable)
    with tempfile.TemporaryDirectory(prefix="cudafix-doc-") as scratch:
        if setup:
            subprocess.run(["bash", "-c", setup], cwd=scratch, env=dict(_env_for("", scratch), PYTHON=sys.executable),
                           check=True, timeout=600, stdout=subprocess.DEVNULL)
        p = subprocess.run(["bash", "-c", prelude + "{ " + cmd + "\n} 2>&1"], cwd=scratch if setup else ROOT, env=_env_for(cmd, scratch),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = p.stdout.decode("utf-8", "replace").rstrip("\n")
    home = os.environ.get("HOME", "").rstrip("/")
    if home:  # the same doc on every machine: a path under the home directory as the user typed it
        out = out.replace(home + "/", "~/")
    return "```text\n$ %s\n%s\n```\n" % (cmd, out) if out else "```text\n$ %s\n```\n" % cmd


def render(text: str) -> Tuple[str, List[str]]:
    stale: List[str] = []

    def sub(m: "re.Match") -> str:
        new = run(m.group("cmd"), m.group("setup") or "")
        if new != m.group("fence"):
            stale.append(m.group("cmd"))
        return m.group(0)[:m.start("fence") - m.start(0)] + new

    return BLOCK.sub(sub, text), stale


def check(names: List[str] = None) -> List[str]:
    """``doc: command`` for every block whose fence is not what the command prints now."""
    stale: List[str] = []
    for name in names or docs():
        with open(os.path.join(ROOT, name), encoding="utf-8") as fh:
            stale += ["%s: %s" % (name, c) for c in render(fh.read())[1]]
    return stale


def main(argv: List[str]) -> int:
    stale: List[str] = []
    for name in docs():
        path = os.path.join(ROOT, name)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        new, got = render(text)
        stale += ["%s: %s" % (name, c) for c in got]
        if "--check" not in argv and new != text:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(new)
    if "--check" in argv:
        for s in stale:
            print("stale: %s" % s)
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
