"""The error cudafix predicts for an extension module is the one the loader really reports
(issue 27, point 4), proven by real loads of the real torchvision 0.29.1 CUDA wheel (venv
torchvision-cu) next to other real torch wheels, in venvs made here with a .pth onto the shared
venvs' site-packages (nothing is installed into them):

- next to the torch 2.13.0 CPU wheel, ctypes.CDLL after `import torch` fails with
  "libc10_cuda.so: cannot open shared object file" (a DT_NEEDED library the CPU torch lacks), not
  with the undefined symbol that binding would hit later; `import torchvision` fails;
- one cause, one finding: torchvision-mismatch carries every file that really fails to load and
  the exact text of the first failure; ext-torch-symbols adds no second finding.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from tests.conftest import VENVS, require, run_cudafix
from tests.test_startup_helpers import make_venv

LOAD = r"""
import ctypes, json, sys, warnings
warnings.simplefilter("ignore")
import torch
out = {}
for p in sys.argv[1:]:
    try:
        ctypes.CDLL(p)
        out[p] = None
    except OSError as e:
        out[p] = str(e)
print(json.dumps(out))
"""


def _site(name: str) -> pathlib.Path:
    found = sorted((VENVS / name).glob("lib/python3.*/site-packages"))
    require(len(found) == 1 and (VENVS / name / "bin" / "python").exists(), "test venv %s (tests/make_venvs.sh)" % name)
    return found[0]


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "PYTORCH", "TORCH", "LD_", "CONDA", "PYTHON"))}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), CUDAFIX_DISABLE="1")
    return env


def _combo(tmp_path_factory, torch_venv):
    tv, t = _site("torchvision-cu"), _site(torch_venv)
    base = (VENVS / torch_venv / "bin" / "python").resolve()
    py = make_venv(tmp_path_factory.mktemp("advice-tv-" + torch_venv) / "v", cudafix=False, deps=[t, tv], python=str(base))
    mods = sorted(str(p) for p in (tv / "torchvision").glob("*.so"))
    assert mods
    return py, mods


@pytest.fixture(scope="module")
def tv_over_cpu(tmp_path_factory):
    return _combo(tmp_path_factory, "torch-cpu")


def _real_errors(py, mods, env):
    real = subprocess.run([str(py), "-c", LOAD, *mods], capture_output=True, text=True, env=env, cwd="/", timeout=300)
    assert real.returncode == 0, real.stderr[-2000:]
    return json.loads(real.stdout.strip().splitlines()[-1])


# torch-cpu: the CPU torch lacks libc10_cuda.so, a DT_NEEDED of the CUDA torchvision;
# torch-251: every library is found (libcudart.so.13 from the machine's CUDA 13.0 toolkit in
# ld.so.cache), so the first failure is a symbol torch 2.5.1 does not define
@pytest.mark.parametrize("torch_venv,kind", [("torch-cpu", "cannot open shared object file"), ("torch-251", "undefined symbol")])
def test_one_finding_quoting_the_first_failure_the_loader_really_reports(torch_venv, kind, tmp_path_factory, tmp_path):
    py, mods = _combo(tmp_path_factory, torch_venv)
    env = _env(tmp_path)
    errors = {p: e for p, e in _real_errors(py, mods, env).items() if e}
    assert errors, "no module failed to load: the scenario is gone"
    assert all(kind in e for e in errors.values()), errors  # the truth, from ctypes after `import torch`
    imp = subprocess.run([str(py), "-c", "import torchvision"], capture_output=True, text=True, env=env, cwd="/", timeout=300)
    assert imp.returncode != 0  # the user's import really fails

    r = run_cudafix(py, "status", "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    ours = [f for f in doc["findings"] if f["rule"] in ("torchvision-mismatch", "ext-torch-symbols")]
    assert [f["rule"] for f in ours] == ["torchvision-mismatch"], [(f["rule"], f["subject"]) for f in ours]
    (f,) = ours
    # every file that really fails is in the evidence, and the message quotes a real first failure exactly
    for p in errors:
        assert any(e.startswith(p + " ") for e in f["evidence"]), (p, f["evidence"])
    quoted = f["message"].rsplit(" fails with '", 1)
    assert len(quoted) == 2, f["message"]
    name, text = quoted[0].rsplit("loading ", 1)[1], quoted[1][:-1]
    assert [e for p, e in errors.items() if os.path.basename(p) == name] == [text], (name, text, errors)
    # and the one plan still answers it (the finding's files belong to the torchvision it replaces)
    assert not doc["plan"]["blockers"] and any("torchvision" in c for c in map(str, doc["plan"]["changes"])), doc["plan"]


def test_the_loader_simulation_agrees_with_ctypes_on_each_file(tv_over_cpu, tmp_path):
    """Per file, against the real load, with and without an LD_LIBRARY_PATH that changes nothing."""
    from cudafix.probes.pyenv.extload import first_missing_needed

    py, mods = tv_over_cpu
    env = _env(tmp_path)
    errors = _real_errors(py, mods, env)
    torch_dir = str(_site("torch-cpu") / "torch")
    for p in mods:
        soname, _by, how = first_missing_needed(p, torch_dir, env, executable=str(py))
        if errors[p] is None:
            assert soname is None, (p, how)
        elif "cannot open shared object file" in errors[p]:
            assert errors[p] == "%s: cannot open shared object file: No such file or directory" % soname, (p, errors[p], soname)
