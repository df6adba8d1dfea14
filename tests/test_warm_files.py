"""warm.log and warm.lock never follow another user's links (issue 21, hardening item 3), and no
module writes a file other than through cudafix/store (architecture, from source).

With HOME unset the env's cache dir is /tmp/cudafix-<uid>/envs/<key>: another user can make it
first and plant links there.  Before this change root created and appended warm.log / warm.lock
through them (into /etc/profile.d/ on the machine the attack ran on).  Here the directories and
links are really owned by a second user (created with useradd; files given to it with chown/lchown
by this root test), in a sticky world-writable directory standing in for /tmp.  Both behaviour
tests fail on 51656f0.
"""

from __future__ import annotations

import ast
import os
import pathlib
import sys
import time

import pytest

from tests import users

OTHER = "cfxsec-lock"
REPO = pathlib.Path(__file__).resolve().parent.parent


other = users.module_user(OTHER)


def _planted(tmp_path: pathlib.Path, other, name: str, target: pathlib.Path) -> pathlib.Path:
    """<sticky tmp>/cudafix-0/envs/k made by ``other`` (0777), with ``name`` -> ``target`` (its link)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    d = tmp / ("cudafix-%d" % os.geteuid()) / "envs" / "k"
    d.mkdir(parents=True)
    for p in (d, d.parent, d.parent.parent):
        os.chown(str(p), other.pw_uid, other.pw_gid)
        p.chmod(0o777)
    link = d / name
    link.symlink_to(target)
    os.lchown(str(link), other.pw_uid, other.pw_gid)
    return d


def test_lock_never_created_through_another_users_link(tmp_path, other):
    from cudafix.warm import runtime as warmrun

    target = tmp_path / "etc-profile.d-evil.sh"  # where the other user wants root to create a file
    d = _planted(tmp_path, other, "warm.lock", target)
    lock, why = warmrun.take_lock_why(str(d))
    assert lock is None and "cannot be used" in why, why
    assert not os.path.lexists(str(target))


def test_log_never_appended_through_another_users_link(tmp_path, other):
    from cudafix.warm import runtime as warmrun
    from tests.test_child_cwd import _warm_snapshot

    target = tmp_path / "victim.conf"  # a file of root's the other user wants appended to
    target.write_text("root's own\n")
    d = _planted(tmp_path, other, "warm.log", target)
    (tmp_path / "mods").mkdir()
    snap = _warm_snapshot(tmp_path / "mods")
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    log = warmrun.start_background(snap, ["ext-ptx-jit"], env, str(d))
    deadline = time.time() + 60
    while log is not None and time.time() < deadline and target.read_text() == "root's own\n":
        time.sleep(0.3)
    assert target.read_text() == "root's own\n"
    assert log is None  # no private place for the log: no background warm (docs/security.md)


def test_log_and_lock_in_a_private_dir_of_ours(tmp_path):
    """The control: ours, 0700: both are made (0600) and the lock excludes a second taker."""
    from cudafix.warm import runtime as warmrun

    d = tmp_path / "cache" / "envs" / "k"
    lock = warmrun.take_lock(str(d))
    assert lock is not None
    assert oct(os.stat(str(d / "warm.lock")).st_mode & 0o777) == "0o600"
    assert oct(os.stat(str(d)).st_mode & 0o777) == "0o700"
    again, why = warmrun.take_lock_why(str(d))
    assert again is None and "another warm holds" in why
    lock.close()


# -- architecture: every file cudafix writes goes through cudafix/store ------------------------

WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
WRITE_CALLS = {("os", "makedirs"), ("os", "mkdir"), ("tempfile", "mkstemp"), ("tempfile", "NamedTemporaryFile"),
               ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("shutil", "move"), ("os", "symlink"),
               ("os", "link"), ("os", "mkfifo")}
WRITE_METHODS = {"write_text", "write_bytes", "touch", "mkdir", "symlink_to"}
# The stdlib's own safe creators (O_EXCL, 0700 / 0600, unpredictable names, or no name at all):
# tempfile.mkdtemp (fleet's srun output dir) and tempfile.TemporaryFile (warm's child output).
# devtools/ writes the generated docs of this repository (a developer's checkout), never a user's files.
EXEMPT_DIRS = ("cudafix/store/", "tools/")


def _names(node: ast.AST):
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            yield n.attr
        elif isinstance(n, ast.Name):
            yield n.id


def _mode_writes(call: ast.Call, pos: int) -> bool:
    mode = call.args[pos] if len(call.args) > pos else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True  # a computed mode: cannot tell, so not allowed here


def writes_outside_store(root: pathlib.Path = REPO):
    bad = []
    for path in sorted((root / "cudafix").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(EXEMPT_DIRS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            f = call.func
            where = "%s:%d" % (rel, call.lineno)
            if isinstance(f, ast.Name) and f.id == "open" and _mode_writes(call, 1):
                bad.append(where + " open() for writing")
            elif isinstance(f, ast.Attribute):
                owner = f.value.id if isinstance(f.value, ast.Name) else None
                if (owner, f.attr) == ("os", "open") and len(call.args) > 1:
                    first = call.args[0]
                    to_devnull = isinstance(first, ast.Attribute) and first.attr == "devnull"
                    if not to_devnull and WRITE_FLAGS & set(_names(call.args[1])):
                        bad.append(where + " os.open() for writing")
                elif (owner, f.attr) == ("os", "fdopen") and _mode_writes(call, 1):
                    bad.append(where + " os.fdopen() for writing")
                elif (owner, f.attr) in WRITE_CALLS:
                    bad.append(where + " %s.%s()" % (owner, f.attr))
                elif owner not in ("os", "tempfile", "shutil") and f.attr in WRITE_METHODS:
                    bad.append(where + " .%s()" % f.attr)
                elif owner is None and f.attr == "open" and _mode_writes(call, 0):
                    bad.append(where + " .open() for writing")
    return bad


def test_every_write_goes_through_store():
    assert writes_outside_store() == [], "write through cudafix/store/safefs.py (or fsutil.py): docs/security.md"


def test_the_write_check_sees_the_writes_of_51656f0(tmp_path):
    """The check is not vacuous: on the tree of 51656f0 it finds warm's log and lock and the rest."""
    import subprocess

    src = tmp_path / "src"
    src.mkdir()
    tar = subprocess.run(["git", "-C", str(REPO), "archive", "51656f0", "cudafix"], capture_output=True, timeout=120)
    if tar.returncode != 0:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("commit 51656f0 not in this checkout")
    subprocess.run(["tar", "-x", "-C", str(src)], input=tar.stdout, check=True, timeout=120)
    found = writes_outside_store(src)
    assert any(f.startswith("cudafix/hook/warm.py") and "os.open" in f for f in found), found
    assert any(f.startswith("cudafix/hook/warm.py") and "open() for writing" in f for f in found), found
    assert any(f.startswith("cudafix/hook/warm.py") and "makedirs" in f for f in found), found
    assert sys.version_info >= (3, 8)
