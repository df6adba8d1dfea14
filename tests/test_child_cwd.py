"""No process cudafix starts imports from the current directory (issue 21, hardening item 1).

`python -m X` and `python -c ...` put the current directory first on sys.path.  A `cudafix/`
package, a `json.py` or a `ctypes/` planted in /tmp or a shared project directory then runs as
whoever activated the env or ran cudafix there (root included), and the activation shells eval
what it prints.  Each test plants such a module in a real directory, runs the real thing from
there, and checks the planted code did NOT run (a marker file it would create stays absent) while
the real cudafix did its work.  All of them fail on 51656f0.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from tests import conda_replay as cr

REPO = cr.REPO
SHELLS = [s for s in cr.SHELLS if cr.available(s)]


def _plant(cwd: pathlib.Path, marker: pathlib.Path) -> None:
    """A hostile cudafix/ (and json.py, ctypes/, pip/, sitecustomize.py) in ``cwd``."""
    code = "open(%r, 'a').write('ran %%s\\n' %% __name__)\n" % str(marker)
    pkg = cwd / "cudafix"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(code)
    # what the shells would eval: sets a variable in every family
    (pkg / "__main__.py").write_text(code + "print('export PWNED=1; set -gx PWNED 1; setenv PWNED 1')\n")
    (cwd / "json.py").write_text(code + "from json_real import *\n")
    (cwd / "ctypes").mkdir()
    (cwd / "ctypes" / "__init__.py").write_text(code)
    (cwd / "pip").mkdir()
    (cwd / "pip" / "__init__.py").write_text(code)
    (cwd / "pip" / "__main__.py").write_text(code)
    (cwd / "sitecustomize.py").write_text(code)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = cr.make_prefix(tmp_path_factory.mktemp("envs") / "env", other_scripts=False)
    # the test-only finding injector imports cudafix from a .pth, before `-m` would look in the
    # cwd: it would hide the very import this test is about.  The real cold path runs instead.
    for f in p.glob("lib/python3*/site-packages/_cudafix_test_inject.pth"):
        f.unlink()
    return p


@pytest.mark.parametrize("shell", SHELLS)
def test_activation_cold_path_never_imports_from_the_current_directory(shell, prefix, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "marker"
    r = cr.Replay(shell, prefix, tmp_path / "w", cr.base_env(home, {"PYTHONPATH": ""}))
    _plant(r.cwd, marker)
    r.activate().snap("during")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), "the planted cudafix/ ran: %s" % marker.read_text()
    assert b"PWNED" not in envs["during"]
    assert b"skipped" not in p.stderr, p.stderr
    # the env's own cudafix ran the cold path: it wrote this shell's activation cache
    fam = cr.SHELLS[shell][1]
    cache = pathlib.Path(str(home / ".cache" / "cudafix" / "activation") + str(prefix) + ".cudafix") / ("activate." + fam)
    assert cache.is_file(), (p.stderr, sorted(str(x) for x in home.rglob("*")))


def test_python_query_child_never_imports_from_the_current_directory(tmp_path, monkeypatch):
    """`status --python` and `fix --apply`'s re-check: the -c probe of another interpreter."""
    from cudafix.probes import query_python

    marker = tmp_path / "marker"
    cwd = tmp_path / "cwd"
    _plant(cwd, marker)
    monkeypatch.chdir(cwd)
    # an empty PYTHONPATH entry (`export PYTHONPATH=$PYTHONPATH:/x` with it unset) names the cwd too
    info, path = query_python(sys.executable, dict(os.environ, PYTHONPATH=":" + str(tmp_path / "x")))
    assert not marker.exists(), marker.read_text()
    assert info.executable and path


def test_status_python_never_imports_from_the_current_directory(tmp_path):
    marker = tmp_path / "marker"
    cwd = tmp_path / "cwd"
    _plant(cwd, marker)
    # the parent itself runs from the checkout by path (not `-m` in the hostile dir: that is the user's own choice)
    code = "import sys; sys.argv = ['cudafix', 'status', '--python', sys.executable, '--json']; sys.path.insert(0, %r);" \
           " from cudafix.cli import main; main()" % str(REPO)
    script = tmp_path / "run.py"
    script.write_text(code)
    p = subprocess.run([sys.executable, "-I", str(script)], cwd=str(cwd), capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=":"))
    assert not marker.exists(), marker.read_text()
    assert '"python"' in p.stdout, p.stderr[-2000:]


def _warm_snapshot(tmp_path: pathlib.Path):
    from cudafix.model.snapshot import GPU, ExtensionModule, Snapshot

    so = tmp_path / "libcfx_ptx.so"
    so.write_bytes(b"\x7fELF")
    snap = Snapshot()
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")]
    snap.python.executable = sys.executable
    snap.extensions.scanned = True
    snap.extensions.modules = [ExtensionModule(path=str(so), ptx=["compute_90"], ptx_bytes={"compute_90": 1000},
                                               cudart="13", cudart_linkage="shared")]
    return snap


def test_warm_child_never_imports_from_the_current_directory(tmp_path, monkeypatch):
    """The -c child that dlopens the modules (imports ctypes, json)."""
    from cudafix.warm import runtime as warmrun
    from cudafix.warm import plan as warm

    marker = tmp_path / "marker"
    cwd = tmp_path / "cwd"
    _plant(cwd, marker)
    monkeypatch.chdir(cwd)
    snap = _warm_snapshot(tmp_path)
    (t,) = warm.targets(snap)
    t.modules = []  # nothing to load: only the child's own imports run
    env = dict(os.environ, CUDA_CACHE_PATH=str(tmp_path / "cache"), PYTHONPATH="")
    res = warmrun.run_child(sys.executable, t, snap, env, timeout=120)
    assert not marker.exists(), marker.read_text()
    assert any(s.get("step") == "done" for s in res["steps"]), res


def test_background_warm_never_imports_from_the_current_directory(tmp_path, monkeypatch):
    """`-m cudafix warm --background`, started by activation in the activating shell's directory."""
    from cudafix.warm import runtime as warmrun
    from cudafix.warm import plan as warm

    marker = tmp_path / "marker"
    cwd = tmp_path / "cwd"
    _plant(cwd, marker)
    monkeypatch.chdir(cwd)
    snap = _warm_snapshot(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    log = warmrun.start_background(snap, ["ext-ptx-jit"], env, str(tmp_path / "cache"))
    assert log == str(tmp_path / "cache" / warm.LOG_FILE)
    deadline = time.time() + 120
    while time.time() < deadline and "nothing to warm" not in open(log).read() and not marker.exists():
        time.sleep(0.3)
    assert not marker.exists(), marker.read_text()
    assert "nothing to warm" in open(log).read()


def test_fix_apply_pip_never_imports_from_the_current_directory(tmp_path, torch_cu_python):
    """`fix --apply` runs `<env python> -m pip install ...`: never a pip/ planted in the cwd."""
    from tests.test_fix_apply_real import CLEAN_ENV, _make_mismatched, _tv_dists

    py = _make_mismatched(tmp_path / "tv", torch_cu_python)
    marker = tmp_path / "marker"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    code = "open(%r, 'a').write('ran %%s\\n' %% __name__)\n" % str(marker)
    (cwd / "pip").mkdir()
    (cwd / "pip" / "__init__.py").write_text(code)
    (cwd / "pip" / "__main__.py").write_text(code)
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    # offline (no index, an empty find-links dir): the real pip runs and fails, nothing changes
    env = dict(CLEAN_ENV, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(empty), PYTHONPATH=str(REPO))
    script = tmp_path / "run.py"
    script.write_text("import sys; sys.path.insert(0, %r); sys.argv[0] = 'cudafix'; from cudafix.cli import main; main()" % str(REPO))
    res = subprocess.run([sys.executable, "-I", str(script), "fix", "--python", str(py), "--apply", "--yes"], cwd=str(cwd),
                         capture_output=True, text=True, env=env, timeout=900)
    assert not marker.exists(), marker.read_text()
    assert "ERROR: Cannot install torchvision==0.29.1" in res.stderr, res.stdout[-2000:] + res.stderr[-2000:]
    assert _tv_dists(py) == ["torchvision-0.28.0.dist-info"]


def test_python_query_reports_cwd_relative_entries_as_the_users_programs_see_them(tmp_path, monkeypatch):
    """The child runs in `/`, but an empty or relative PYTHONPATH entry is still reported where the
    user's own programs (started here) resolve it -- the truth: that interpreter run here."""
    from cudafix.probes import query_python

    cwd = tmp_path / "cwd"
    (cwd / "src").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(["", "src", str(tmp_path / "abs")]))
    env.pop("CUDAFIX_DISABLE", None)
    truth = subprocess.run([sys.executable, "-c", "import sys, json; print(json.dumps(sys.path[1:4]))"], env=env,
                           capture_output=True, text=True, cwd=str(cwd), timeout=60)
    _info, path = query_python(sys.executable, env)
    import json

    assert path[:3] == json.loads(truth.stdout), (path[:3], truth.stdout)
