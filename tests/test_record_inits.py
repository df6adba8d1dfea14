"""cudafix/model/record_inits.py (the record classes' ``__init__`` compiled ahead, issue 23) is
current, serves every record class, and a class it lacks is still built right.

What the functions do is checked against dataclasses.dataclass by tests/test_record.py for every
record class; here: the generator's --check, no class compiled at run time on the status path,
and the fallback (a new class, or the table missing) against dataclasses' own __init__.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Dict

from cudafix.model import record as rec
from tests.conftest import REPO


def test_generated_file_is_current():
    p = subprocess.run([sys.executable, "-m", "tools.record_inits", "--check"], cwd=str(REPO),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


def test_status_compiles_no_init_at_run_time(tmp_path):
    # reported at exit (atexit): `status` leaves by os._exit once atexit's handlers ran (cudafix.cli._leave)
    code = ("import atexit, sys, runpy; sys.argv = ['cudafix', 'status', '--json']\n"
            "def report():\n"
            "    from cudafix.model import record\n"
            "    sys.stderr.write('\\nRECORD ' + str(len(record.SOURCES)) + ' ' + str(len(record.MISSED)) + '\\n')\n"
            "atexit.register(report)\n"
            "runpy.run_module('cudafix', run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                       env={"PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert json.loads(p.stdout)["schema"] == "cudafix.status/1"
    built, missed = map(int, [x for x in p.stderr.splitlines() if x.startswith("RECORD ")][-1].split()[1:])
    assert built > 40 and missed == 0


def _pair(body: Dict[str, object]):
    ns_a = dict(body, __doc__="A test class.")
    ns_b = dict(body, __doc__="A test class.")
    return rec.record(type("Fresh", (), ns_a)), dataclasses.dataclass(type("Fresh", (), ns_b))


def test_a_class_the_table_lacks_is_compiled_and_right():
    before = len(rec.MISSED)
    body = {"__annotations__": {"name_x9": "str", "count_x9": "int", "tags_x9": "List[str]", "note_x9": "Optional[str]"},
            "count_x9": 3, "tags_x9": dataclasses.field(default_factory=list), "note_x9": None}
    mine, theirs = _pair(body)
    assert len(rec.MISSED) == before + 1  # not in record_inits.py: compiled here
    for args, kw in [(("a",), {}), (("a", 5), {"note_x9": "n"}), ((), {"name_x9": "b", "tags_x9": ["t"]})]:
        a, b = mine(*args, **kw), theirs(*args, **kw)
        assert dataclasses.astuple(a) == dataclasses.astuple(b) and repr(a) == repr(b)
    assert mine("a").tags_x9 is not mine("a").tags_x9  # a fresh list each time, as dataclasses makes


def test_without_the_table_every_class_is_compiled(monkeypatch):
    from cudafix.model import snapshot

    src_cls = snapshot.PythonInfo
    fields = dataclasses.fields(src_cls)
    body: Dict[str, object] = {"__annotations__": dict(src_cls.__annotations__)}
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:
            body[f.name] = dataclasses.field(default_factory=f.default_factory)
        elif f.default is not dataclasses.MISSING:
            body[f.name] = f.default
    monkeypatch.setattr(rec, "_COMPILED", [{}])  # as if record_inits.py were missing
    before = len(rec.MISSED)
    mine, theirs = _pair(body)
    assert len(rec.MISSED) == before + 1
    assert repr(mine()) == repr(theirs()) == repr(src_cls()).replace("PythonInfo(", "Fresh(")
