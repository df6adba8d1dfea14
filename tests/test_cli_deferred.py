"""cudafix.cli.deferred under every real CPython 3.8+ on this machine: `status` and `check`
print what they print with inspect imported up front (the truth: the same command without the
stand-in), import none of inspect's modules on 3.8-3.11 and never typing, and leave a working
``inspect``."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.conftest import REPO
from tests.test_startup_versions import INTERPRETERS

# Runs the fast path in-process, with or without `import inspect` first, and reports the output
# and which of inspect's own imports happened.
RUN = r"""
import io, contextlib, json, sys
if sys.argv[1] == "inspect-first":
    import inspect
from cudafix.cli import fast
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    try:
        rc = fast.fast_main(sys.argv[2:])
    except SystemExit as e:
        rc = e.code
loaded = sorted(m for m in ("inspect", "ast", "dis", "tokenize", "typing") if m in sys.modules)
stand_in = type(sys.modules.get("inspect")).__name__ == "_Deferred"
print(json.dumps({"rc": rc, "out": buf.getvalue(), "loaded": loaded, "stand_in_left": stand_in}))
"""


def _run(python, mode, argv, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "cache"), CUDAFIX_DISABLE="1")
    p = subprocess.run([python, "-S", "-c", RUN, mode] + argv, capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def _version(python):
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True)
    return tuple(int(x) for x in out.stdout.split("."))


def _same(a, b):
    """The two documents but for the time they were made (the JSON's "created", the text's "at ...")."""
    if a.startswith("{"):
        a, b = json.loads(a), json.loads(b)
        for d in (a, b):
            d["snapshot"].pop("created", None)
        return a == b
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")
    return stamp.sub("T", a) == stamp.sub("T", b)


@pytest.mark.parametrize("python", INTERPRETERS, ids=os.path.basename)
@pytest.mark.parametrize("argv", [["status", "--json"], ["status"], ["status", "-v"], ["check"], ["check", "--json"]],
                         ids=" ".join)
def test_output_as_with_inspect_imported_first(python, argv, tmp_path):
    truth = _run(python, "inspect-first", argv, tmp_path)
    got = _run(python, "deferred", argv, tmp_path)
    assert got["rc"] == truth["rc"]
    assert _same(got["out"], truth["out"]), (got["out"][:400], truth["out"][:400])
    assert not got["stand_in_left"]
    # typing: the modules on this path import it for the type checker only (issue 23)
    assert "typing" not in got["loaded"]
    if _version(python) < (3, 12):
        assert got["loaded"] == [], "inspect's modules were imported: %s" % got["loaded"]


DATACLASS_AFTER = r"""
import sys
from cudafix.cli.deferred import defer_inspect, restore
s = defer_inspect()
import dataclasses, inspect

@dataclasses.dataclass
class NoDoc:
    a: int
    b: str = "x"

print(NoDoc.__doc__)                       # dataclasses asks inspect.signature for it
print(inspect.signature(NoDoc))
print(sys.modules["inspect"] is not s, inspect.getsource is sys.modules["inspect"].getsource)
restore(s)
import inspect as again
print(type(again).__name__)
"""


@pytest.mark.parametrize("python", INTERPRETERS, ids=os.path.basename)
def test_inspect_works_through_the_stand_in(python, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    truth = subprocess.run([python, "-S", "-c", DATACLASS_AFTER.replace("s = defer_inspect()", "s = None")],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    got = subprocess.run([python, "-S", "-c", DATACLASS_AFTER], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                         timeout=60)
    assert got.returncode == 0 and truth.returncode == 0, got.stderr + truth.stderr
    lines, want = got.stdout.splitlines(), truth.stdout.splitlines()
    assert lines[:2] == want[:2] == ["NoDoc(a: int, b: str = 'x')", "(a: int, b: str = 'x') -> None"]
    assert lines[2] == "True True" and lines[3] == "module"
