"""The startup hook in real interpreters of real venvs (cudafix copied into site-packages).

What `python -c pass` must never do with the hook installed; the in-process corrections being in
os.environ when `import torch` begins; policy variables; once-per-process-tree warnings; odd
interpreters (-I, -S, no HOME, read-only site-packages, stale .pth); concurrency on a cold cache.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

import _cudafix_startup
from cudafix.hook import cache as hookcache
from tests.conftest import require
from tests.test_startup_cache import ADVICE, JIT
from tests.test_startup_helpers import (
    COUNT_PTH, TORCH_CPU_SITE, TORCH_CU_SITE, clean_env, make_venv, run, site_packages, stub_torch, write_plan,
)

MODULES = "import sys; print(json.dumps(sorted(sys.modules)))"
ALLOC = {"rule": "alloc-conf-invalid", "severity": "warning", "message": "PYTORCH_CUDA_ALLOC_CONF key bogus is unknown to torch 2.13",
         "fix": {"summary": "drop the unknown key", "auto": True, "applies_in": "both",
                 "env": [{"op": "set", "name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"}]}}
HOME_FIX = {"rule": "cuda-home-mismatch", "severity": "warning", "message": "CUDA_HOME toolkit /x (CUDA 12.1) does not match torch's CUDA 13.0",
            "fix": {"summary": "set CUDA_HOME=/usr/local/cuda-13.0", "auto": True, "applies_in": "process",
                    "env": [{"op": "set", "name": "CUDA_HOME", "value": "/usr/local/cuda-13.0"}]}}
PLAN = json.dumps([JIT.to_dict(), ALLOC, HOME_FIX, ADVICE.to_dict()])

# A meta_path probe put right after cudafix's finder: it sees os.environ at the moment
# `import torch` begins (after cudafix's finder ran), then aborts the import (no need to load torch).
AT_IMPORT = r"""
import json, os, sys
class Probe:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print(json.dumps({k: os.environ.get(k) for k in ("CUDA_CACHE_MAXSIZE", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_HOME")}))
            raise ImportError("stop here")
idx = [i for i, f in enumerate(sys.meta_path) if getattr(f, "cudafix", False)]
sys.meta_path.insert(idx[0] + 1 if idx else 0, Probe())
print("finder" if idx else "no finder")
try:
    import torch
except ImportError:
    pass
"""


@pytest.fixture(scope="session")
def venvs(tmp_path_factory):
    root = tmp_path_factory.mktemp("venvs")
    stubs = stub_torch(root / "stub", version="2.5.1", cuda=None)  # a CPU build: no finding of its own
    return {
        "plain": make_venv(root / "plain", cudafix=False, deps=[TORCH_CU_SITE]),
        "hook": make_venv(root / "hook", deps=[TORCH_CU_SITE]),
        "cpu": make_venv(root / "cpu", deps=[TORCH_CPU_SITE]),
        "stub": make_venv(root / "stub-venv", deps=[stubs]),
        "bare": make_venv(root / "bare"),
    }


@pytest.fixture
def env(tmp_path):
    return clean_env(tmp_path / "cache")


def _modules(python, env, *args):
    p = run(python, "import json; " + MODULES, env, args)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return set(json.loads(p.stdout))


def test_python_c_pass_imports_nothing_new(venvs, env):
    plain = _modules(venvs["plain"], env)
    cold = _modules(venvs["hook"], env)
    write_plan(venvs["hook"], PLAN, env)
    warm = _modules(venvs["hook"], env)
    assert cold - plain == {"_cudafix_startup"}
    assert warm - plain == {"_cudafix_startup"}


MAPS = "print(open('/proc/self/maps').read())"


@pytest.mark.parametrize("warm", [False, True])
def test_no_driver_library_loaded_no_torch_no_output(venvs, env, warm):
    if warm:
        write_plan(venvs["hook"], PLAN, env)
    p = run(venvs["hook"], "import sys; " + MAPS + "; print('TORCH' if 'torch' in sys.modules else '')", env)
    assert p.returncode == 0 and p.stderr == ""
    assert not re.search(r"libcuda|libnvidia-ml|libtorch|libcudart", p.stdout)
    assert "TORCH" not in p.stdout


@pytest.mark.parametrize("warm", [False, True])
def test_no_process_spawned(venvs, env, tmp_path, warm):
    require(shutil.which("strace"), "strace not installed (./run test installs it)")
    if warm:
        write_plan(venvs["hook"], PLAN, env)
    out = tmp_path / "trace"
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", str(out),
                        str(venvs["hook"]), "-c", "pass"], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    calls = [ln for ln in out.read_text().splitlines() if re.search(r"\b(execve|clone3?|v?fork)\(", ln)]
    assert len(calls) == 1 and "execve(" in calls[0], calls  # the interpreter itself, nothing else


def test_warm_cache_corrections_in_environ_when_import_torch_begins(venvs, env):
    env["PYTORCH_CUDA_ALLOC_CONF"] = "bogus:1"
    write_plan(venvs["cpu"], PLAN, env)
    p = run(venvs["cpu"], AT_IMPORT, env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "finder"  # a warning is due for `import torch`: the finder waits for it
    assert json.loads(lines[1]) == {"CUDA_CACHE_MAXSIZE": "4294967296", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                    "CUDA_HOME": "/usr/local/cuda-13.0"}


def test_corrections_inherited_by_children_without_a_recompute(venvs, env):
    # The corrections are made at `import torch` (docs/hook.md): a child started after it sees
    # them in its environment before its own check runs, and its check finds the cache entry
    # (the entry's post-correction fingerprint) without a recompute.
    write_plan(venvs["stub"], PLAN, env)
    code = ("import os, subprocess, sys, torch; print(os.environ.get('CUDA_CACHE_MAXSIZE')); sys.stdout.flush(); "
            "subprocess.run([sys.executable, '-c', 'import cudafix.hook.runtime as h, os; v = os.environ.get(\"CUDA_CACHE_MAXSIZE\"); print(h.check().entry is not None, v)'])")
    p = run(venvs["stub"], code, env)
    assert p.stdout.split("\n")[:2] == ["4294967296", "True 4294967296"], p.stdout + p.stderr


def test_no_corrections_in_a_process_that_never_imports_torch(venvs, env):
    # the one thing the move to `import torch` gives up (docs/hook.md)
    write_plan(venvs["cpu"], PLAN, env)
    code = ("import os, subprocess, sys; print(os.environ.get('CUDA_CACHE_MAXSIZE')); sys.stdout.flush(); "
            "subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get(\"CUDA_CACHE_MAXSIZE\"))'])")
    p = run(venvs["cpu"], code, env)
    assert p.stdout.split("\n")[:2] == ["None", "None"], p.stdout + p.stderr


def test_python_c_pass_reads_no_cache_and_installs_the_finder(venvs, env, tmp_path):
    require(shutil.which("strace"), "strace not installed (./run test installs it)")
    path = write_plan(venvs["hook"], PLAN, env)
    out = tmp_path / "trace"
    code = "import sys; print(sum(1 for f in sys.meta_path if getattr(f, 'cudafix', 0) is True))"
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,open,stat,newfstatat,statx,lstat", "-o", str(out),
                        str(venvs["hook"]), "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    assert (p.returncode, p.stdout, p.stderr) == (0, "1\n", ""), p.stderr
    trace = out.read_text()
    assert hookcache.CACHE_FILE not in trace and os.path.dirname(path) not in trace
    assert "/sys/module/nvidia" not in trace and "/proc/driver/nvidia" not in trace
    assert "torch/version.py" not in trace
    # site.py's second pass over a venv's .pth files skips cudafix.pth (_skip_second_pass)
    assert len(re.findall(r'open(?:at)?\(.*/cudafix\.pth"', trace)) == 1, trace


def test_policy_mode_warn_off_disable_skip(venvs, env):
    write_plan(venvs["cpu"], PLAN, env)
    def seen(**extra):
        e = dict(env, **extra)
        p = run(venvs["cpu"], AT_IMPORT, e)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        return lines[0], json.loads(lines[1]), p.stderr.count("CudafixWarning")
    none = {"CUDA_CACHE_MAXSIZE": None, "PYTORCH_CUDA_ALLOC_CONF": None, "CUDA_HOME": None}
    assert seen(CUDAFIX_MODE="warn") == ("finder", none, 4)  # warnings only, every finding said
    assert seen(CUDAFIX_MODE="off") == ("no finder", none, 0)
    assert seen(CUDAFIX_DISABLE="1") == ("no finder", none, 0)
    assert seen(CUDAFIX_MODE="bogus")[1] == {"CUDA_CACHE_MAXSIZE": "4294967296", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                             "CUDA_HOME": "/usr/local/cuda-13.0"}  # unknown mode: the default
    finder, got, n = seen(CUDAFIX_SKIP="jit-cache-too-small, cuda-home-mismatch")
    assert got == dict(none, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    assert n == 1  # skipped rules are not said, the corrected alloc conf is quiet: driver-too-old only


def test_debug_says_what_and_why(venvs, env):
    write_plan(venvs["cpu"], PLAN, env)
    start = "cudafix: finder installed: the check runs at `import torch`"
    p = run(venvs["cpu"], "pass", dict(env, CUDAFIX_DEBUG="1"))
    assert p.stderr.splitlines() == [start]  # the check waits for `import torch`
    p = run(venvs["cpu"], AT_IMPORT, dict(env, CUDAFIX_DEBUG="1"), ["-W", "ignore"])  # (no warnings: debug lines only)
    lines = p.stderr.splitlines()
    assert lines[0] == start
    assert lines[1].startswith("cudafix: cache fresh (")
    assert "cudafix: set CUDA_CACHE_MAXSIZE=4294967296 [jit-cache-too-small]" in lines
    assert all(ln.startswith("cudafix: ") for ln in lines)
    p = run(venvs["cpu"], AT_IMPORT, dict(env, CUDAFIX_DEBUG="1", CUDA_HOME="/elsewhere"))
    assert "no fresh cache entry: the check runs now, at `import torch`" in p.stderr


def test_warnings_once_per_process_tree_and_filterable(venvs, env):
    write_plan(venvs["stub"], PLAN, env)
    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import torch'])"
    p = run(venvs["stub"], "import torch; " + child, env)
    assert p.returncode == 0
    warn_lines = [ln for ln in p.stderr.splitlines() if "CudafixWarning" in ln]
    # the parent warns about the advice-only finding once; the child inherits the marker; the
    # corrected plain-variable findings are quiet
    assert len(warn_lines) == 1 and "[driver-too-old]" in warn_lines[0] and "<string>:1:" in warn_lines[0], p.stderr
    p = run(venvs["stub"], "import warnings, cudafix.hook.runtime as h; warnings.simplefilter('ignore', h.CudafixWarning); import torch", env)
    assert p.stderr == ""
    p = run(venvs["stub"], "import torch", dict(env, CUDAFIX_MODE="warn"))
    assert p.stderr.count("CudafixWarning") == 4  # nothing corrected: every finding is said


def test_find_spec_probe_is_not_an_import(venvs, env):
    write_plan(venvs["stub"], PLAN, env)
    p = run(venvs["stub"], "import importlib.util, sys; importlib.util.find_spec('torch'); "
            "print(any(getattr(f, 'cudafix', 0) for f in sys.meta_path)); import torch; "
            "print(any(getattr(f, 'cudafix', 0) for f in sys.meta_path))", env)
    assert p.stdout.split() == ["True", "False"]
    assert p.stderr.count("CudafixWarning") == 1


def test_hook_runs_once_even_when_called_again(venvs, env):
    write_plan(venvs["stub"], PLAN, env)
    p = run(venvs["stub"], "import sys, _cudafix_startup as h; h.run(); h.run(); "
            "print(sum(1 for f in sys.meta_path if getattr(f, 'cudafix', 0))); import torch; h.run()", dict(env, CUDAFIX_DEBUG="1"))
    assert p.stdout.strip() == "1"
    assert p.stderr.count("finder installed") == 1
    assert p.stderr.count("cache fresh") == 1


def test_startup_module_globals_hold_no_module():
    # The finder keeps _cudafix_startup's globals alive until the interpreter's finalization; a
    # module object in them (a module-level `import os`) is then kept past finalization's first
    # collection and its dict cleared name by name: ~0.45 M instructions at every exit, measured
    # with callgrind (docs/benchmarks.md).  Hence the function-local imports.
    import types

    assert [k for k, v in vars(_cudafix_startup).items() if isinstance(v, types.ModuleType)] == []


@pytest.mark.parametrize("cudafix", [False, True])
def test_other_pth_files_run_as_without_cudafix_and_site_is_left_as_found(tmp_path, env, cudafix):
    # In a venv, site.py runs every .pth twice (CPython issue 75723); cudafix's .pth is skipped the
    # second time by a wrapper of site.addpackage (_cudafix_startup._skip_second_pass) that must
    # leave every other .pth file alone, before and after cudafix.pth in name order, and be gone
    # once site is done.
    py = make_venv(tmp_path / "v", cudafix=cudafix)
    site = site_packages(tmp_path / "v")
    (site / "aa-first.pth").write_text(COUNT_PTH % "aa")
    (site / "zz-last.pth").write_text(COUNT_PTH % "zz")
    code = ("import site, sys; print(sys.aa, sys.zz, site.addpackage.__module__, site.addpackage.__qualname__, "
            "sum(1 for f in sys.meta_path if getattr(f, 'cudafix', 0) is True))")
    p = run(py, code, env)
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.split() == ["[1,", "1]", "[1,", "1]", "site", "addpackage", "1" if cudafix else "0"]


def test_second_pass_skip_is_exact(tmp_path, env):
    # The wrapper skips cudafix.pth of one directory (the one whose .pth started the hook), once,
    # then is gone; a cudafix.pth elsewhere still runs.  Here the wrapper is installed by hand
    # for directory `mine`, as a Python without the second pass would leave it, and two directories
    # are then added with site.addsitedir, as a tool might.
    py = make_venv(tmp_path / "v")
    dirs = {}
    for name in ("mine", "other"):
        dirs[name] = tmp_path / name
        dirs[name].mkdir()
        (dirs[name] / "cudafix.pth").write_text(COUNT_PTH % name)
    code = """
import site, sys, _cudafix_startup as h
orig = site.addpackage
h._skip_second_pass(site, %r)
site.addsitedir(%r)
print(getattr(sys, "other", None), site.addpackage is orig)
site.addsitedir(%r)
print(getattr(sys, "mine", None), site.addpackage is orig)
""" % (str(dirs["mine"]), str(dirs["other"]), str(dirs["mine"]))
    p = run(py, code, env)
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.splitlines() == ["[1] False", "None True"]


@pytest.mark.parametrize("flags", [["-I"], ["-S"], ["-E"], ["-I", "-S"]])
def test_odd_interpreters(venvs, env, flags):
    p = run(venvs["hook"], "import sys; print('_cudafix_startup' in sys.modules)", env, flags)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.strip() == ("False" if "-S" in flags else "True")


def test_no_home_uses_private_tmp_cache(venvs, env):
    e = {k: v for k, v in env.items() if k not in ("HOME", "XDG_CACHE_HOME")}
    p = run(venvs["hook"], "import cudafix.hook.runtime as h; print(h.check().cache_path)", e)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.strip().startswith("/tmp/cudafix-%d/envs/" % os.getuid())


def test_stale_pth_after_uninstall_is_silent(tmp_path, env):
    py = make_venv(tmp_path / "v")
    site = site_packages(tmp_path / "v")
    shutil.rmtree(str(site / "cudafix"))
    os.unlink(str(site / "_cudafix_startup.py"))
    p = run(py, "print('ok')", env)
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


def test_package_gone_but_startup_module_left_is_silent(tmp_path, env):
    py = make_venv(tmp_path / "v", deps=[stub_torch(tmp_path / "s")])
    shutil.rmtree(str(site_packages(tmp_path / "v") / "cudafix"))
    p = run(py, "import torch; print('ok')", env)
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


def test_read_only_site_packages_and_unwritable_cache_as_another_user():
    require(os.geteuid() == 0 and shutil.which("setpriv"), "needs root + setpriv to run as nobody")
    base = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-ro-"))  # reachable by nobody (unlike pytest's tmp)
    try:
        _read_only_as_nobody(base)
    finally:
        shutil.rmtree(str(base))


def _read_only_as_nobody(base):
    root = base / "ro"
    root.mkdir()
    py = make_venv(root / "v", deps=[stub_torch(root / "s", version="2.5.1", cuda=None)])
    ro_cache = base / "rocache"
    ro_cache.mkdir()
    subprocess.run(["chmod", "-R", "a+rX,a-w", str(base)], check=True)
    env = {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(ro_cache)}
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(py), "-c",
                        "import torch, cudafix.hook.runtime as h; print(h.check().entry is not None)"],
                       env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True"  # checked in-process; just not cached
    assert p.stderr == ""
    assert list(ro_cache.iterdir()) == []


def test_64_interpreters_on_a_cold_cache(venvs, env):
    code = "import torch, cudafix.hook.runtime as h; print(h.check().entry is not None)"
    procs = [subprocess.Popen([str(venvs["stub"]), "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
             for _ in range(64)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs if o[1]][:3]
    assert all(o == ("True\n", "") for o in outs), [o for o in outs if o != ("True\n", "")][:3]
    path = run(venvs["stub"], "import cudafix.hook.runtime as h; print(h.check().cache_path)", env).stdout.strip()
    d = pathlib.Path(path).parent
    assert [x.name for x in d.iterdir() if x.name.startswith(".")] == []  # no temp file left
    entries, why = hookcache.read_cache(path)
    assert why is None and len(entries) == 1  # one whole cache, one fingerprint
    p = run(venvs["stub"], "import cudafix.hook.runtime as h; print(h.check().entry is not None)", env)
    assert p.stdout.strip() == "True"
