"""The target interpreter: its sys.path, prefix, version and platform, asked with one bounded
subprocess (another interpreter) or read here (this one).  The first step of the Python env
section (cudafix/probes/sections.py): everything else it reads follows from this sys.path.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Tuple

    from cudafix.model.snapshot import PythonInfo

PYTHON_QUERY_TIMEOUT_S = 30.0

# Runs inside the inspected interpreter: stdlib only, Python 2.7/3.x syntax, one JSON line.
_QUERY = (
    "import sys, json\n"
    "try:\n"
    "    import sysconfig; plat = sysconfig.get_platform()\n"
    "except Exception:\n"
    "    plat = ''\n"
    "sys.stdout.write('\\n' + json.dumps({'executable': sys.executable, 'version': '%d.%d.%d' % tuple(sys.version_info[:3]),"
    " 'prefix': sys.prefix, 'path': sys.path, 'platform': plat}) + '\\n')\n"
)


class ProbeError(RuntimeError):
    """A probe could not run at all (its message lands in probe_errors)."""


def parse_python_query(stdout: str) -> Dict[str, Any]:
    """The JSON line the query script printed (the last line that parses; .pth noise ignored)."""
    import json

    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("path"), list):
                return data
    raise ProbeError("the interpreter printed no sys.path report")


def query_python(python: str, env: Mapping[str, str], timeout: float = PYTHON_QUERY_TIMEOUT_S) -> Tuple[PythonInfo, List[str]]:
    """sys.path / prefix / version of another interpreter with ONE bounded subprocess.

    ``-c`` (not ``-I -S``): site-packages and .pth files must count, as they do for the user.
    cudafix's own startup hook is switched off in the child (CUDAFIX_DISABLE=1).  It runs in
    ``/`` (safefs.CHILD_CWD): ``-c`` would import a json.py planted in the caller's directory.
    """
    from cudafix.model.snapshot import PythonInfo
    from cudafix.store import runner  # here: `status` on this interpreter never spawns
    from cudafix.store.safefs import CHILD_CWD, env_owners

    child_env = dict(env)
    child_env["CUDAFIX_DISABLE"] = "1"
    # the trusted runner (an interpreter of root's, ours or its env owner's; from /, stdin closed,
    # its group killed on the timeout).  Not -I: the question is the sys.path the user's programs
    # get, PYTHONPATH and the user site included.
    try:
        proc = runner.run([python, "-c", _QUERY], timeout, env=child_env, max_output=1 << 22,
                          owners=env_owners(os.path.dirname(os.path.dirname(python))))
    except OSError as exc:
        raise ProbeError("cannot run %s: %s" % (python, exc.strerror or exc)) from None
    if proc.timed_out:
        raise ProbeError("%s did not answer within %.0f s" % (python, timeout))
    if proc.returncode != 0:
        err = proc.text("stderr").strip().splitlines()
        raise ProbeError("%s exited with %d%s" % (python, proc.returncode, (": " + err[-1]) if err else ""))
    data = parse_python_query(proc.text())
    prefix = str(data.get("prefix") or "")
    info = PythonInfo(executable=str(data.get("executable") or python), version=str(data.get("version") or ""),
                      prefix=prefix, platform=str(data.get("platform") or ""))
    # '' is the child's own cwd (an artifact of -c), not the user's script dir: dropped.
    path = [p for p in data["path"] if isinstance(p, str) and p]
    # An empty or relative PYTHONPATH entry names the current directory: the child (run in `/`)
    # resolved it there; the user's programs resolve it in theirs, as `status` run here would.
    try:
        here = os.getcwd()
    except OSError:
        here = None
    back = {}
    for entry in (env.get("PYTHONPATH") or "").split(os.pathsep) if here else ():
        if not os.path.isabs(entry):
            back[_norm(os.path.join(CHILD_CWD, entry))] = os.path.normpath(os.path.join(here, entry))
    return info, [back.get(_norm(p), p) for p in path]


def _norm(p: str) -> str:
    # the interpreter spells a relative entry resolved in `/` as "//src" (normpath keeps that)
    p = os.path.normpath(p)
    return "/" + p.lstrip("/") if p.startswith("//") else p


def current_python() -> Tuple[PythonInfo, List[str]]:
    import sysconfig

    from cudafix.model.snapshot import PythonInfo

    info = PythonInfo(executable=sys.executable or "", version=_python_version(), prefix=sys.prefix,
                      platform=sysconfig.get_platform())
    return info, list(sys.path)


def _python_version() -> str:
    """platform.python_version() without importing platform (its cost: docs/benchmarks.md):
    CPython's sys.version starts with the version word platform's parser takes, and platform adds
    a patch level of 0 to a bare X.Y.  Anything else is platform's to parse."""
    word = sys.version.split(None, 1)[0] if sys.version.strip() else ""
    plain = word and all(c.isascii() and (c.isalnum() or c in "._+") for c in word)
    if not plain or not word.startswith("%d.%d" % sys.version_info[:2]) or sys.implementation.name != "cpython" \
            or "PyPy" in sys.version or "(" not in sys.version or "[" not in sys.version:
        import platform

        return platform.python_version()
    parts = word.split(".")
    return ".".join(parts + ["0"] if len(parts) == 2 else parts)
