"""Severity is what happens to the user (issue 27, point 5), on the real test venvs.

- cuda-home-mismatch (a system nvcc of another CUDA major on PATH) breaks only extension builds:
  a warning in an env that builds none, an error where one is built (a real torch-linked module
  that no package owns, compiled here with nvcc and g++ against the venv's torch).
- CUDA_VISIBLE_DEVICES='' on a machine whose PCI bus holds no NVIDIA GPU: real torch answers the
  same with and without it, so it is not an error, and `import torch` under the hook is silent.
- torch 1.10 bundles its CUDA libraries under hashed sonames (readelf: nothing another copy could
  shadow): lib-shadowed / nccl-shadowed are ok there, not unknown.
- `check --strict` that fails only by --strict names each warning and unknown that failed it.
- `./run status --json` is exactly one JSON document.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, VENVS, require, run_cudafix

CUDA13 = pathlib.Path("/usr/local/cuda-13.0")


def _venv(name: str) -> pathlib.Path:
    py = VENVS / name / "bin" / "python"
    require(py.exists(), "test venv %s (tests/make_venvs.sh)" % py)
    return py


def _site(venv: str) -> pathlib.Path:
    found = sorted((VENVS / venv).glob("lib/python3.*/site-packages"))
    require(len(found) == 1, "site-packages of %s" % venv)
    return found[0]


def _nvidia_on_pci() -> bool:
    """Independent of cudafix: any PCI function with vendor 0x10de."""
    root = pathlib.Path("/sys/bus/pci/devices")
    return any((d / "vendor").read_text().strip().lower() == "0x10de" for d in root.iterdir() if (d / "vendor").exists())


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "PYTORCH", "TORCH", "LD_", "CONDA"))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def _status(py, env, *args):
    r = run_cudafix(py, "status", "--json", *args, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def _findings(doc, rule):
    return [f for f in doc["findings"] if f["rule"] == rule]


# -- cuda-home-mismatch -------------------------------------------------------------------------


def test_cuda_home_mismatch_is_a_warning_where_nothing_is_built(tmp_path):
    require((CUDA13 / "bin" / "nvcc").exists(), "the CUDA 13.0 toolkit at /usr/local/cuda-13.0")
    py = _venv("torch-110")
    env = _env(tmp_path, PATH="%s:%s" % (CUDA13 / "bin", os.environ.get("PATH", "")))
    # independent truth: the toolkit on PATH is another CUDA major than the torch build
    nv = subprocess.run([str(CUDA13 / "bin" / "nvcc"), "--version"], capture_output=True, text=True).stdout
    tv = subprocess.run([str(py), "-c", "import torch.version as v; print(v.cuda)"], capture_output=True, text=True,
                        env=dict(env, CUDAFIX_DISABLE="1")).stdout.strip()
    assert "release 13." in nv and tv.split(".")[0] != "13"
    doc = _status(py, env)
    f = _findings(doc, "cuda-home-mismatch")
    assert len(f) == 1 and f[0]["severity"] == "warning", f
    r = run_cudafix(py, "check", "--only", "cuda-home-mismatch", env=env, timeout=300)
    assert r.returncode == 0, r.stdout  # a warning: check exits 0


def test_cuda_home_mismatch_is_an_error_where_the_env_builds_extensions(tmp_path):
    require((CUDA13 / "bin" / "nvcc").exists(), "the CUDA 13.0 toolkit at /usr/local/cuda-13.0")
    require(subprocess.run(["g++", "--version"], capture_output=True).returncode == 0, "g++")
    from tests import extbuild
    from tests.test_startup_helpers import make_venv, site_packages

    cu = _venv("torch-cu")
    built = extbuild.build_torch_ext("advice_ext", str(cu), extbuild.gencode_for_arch_list("9.0"))
    # a CUDA 12.1 toolkit that CUDA_HOME names (another major than torch's 13.0)
    fake = tmp_path / "cuda-12.1"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.1, V12.1.105'\n")
    (fake / "bin" / "nvcc").chmod(0o755)
    (fake / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.1.105"}}))
    env = _env(tmp_path, CUDA_HOME=str(fake))

    plain = make_venv(tmp_path / "plain", cudafix=False, deps=[_site("torch-cu")])
    f = _findings(_status(plain, env), "cuda-home-mismatch")
    assert len(f) == 1 and f[0]["severity"] == "warning", f

    builder = make_venv(tmp_path / "builder", cudafix=False, deps=[_site("torch-cu")])
    dest = site_packages(builder.parent.parent) / os.path.basename(built)
    dest.write_bytes(pathlib.Path(built).read_bytes())
    # the module really is an extension built here: it imports against this torch
    p = subprocess.run([str(builder), "-c", "import torch, advice_ext"], capture_output=True, text=True,
                       env=dict(env, CUDAFIX_DISABLE="1"), cwd="/", timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    f = _findings(_status(builder, env), "cuda-home-mismatch")
    assert len(f) == 1 and f[0]["severity"] == "error", f
    assert any(str(dest) in e for e in f[0]["evidence"])


# -- CUDA_VISIBLE_DEVICES='' without NVIDIA hardware --------------------------------------------


def test_empty_visible_devices_without_nvidia_hardware_is_not_an_error(tmp_path):
    require(not _nvidia_on_pci(), "a machine whose PCI bus holds no NVIDIA device")
    from tests.test_startup_helpers import make_venv

    py = make_venv(tmp_path / "v", deps=[_site("torch-110")], python=str(_venv("torch-110").resolve()))
    code = "import torch; print(torch.cuda.is_available(), torch.cuda.device_count())"
    base = _env(tmp_path)
    truth = [subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd="/", timeout=300,
                            env=dict(e, CUDAFIX_DISABLE="1")).stdout for e in (base, dict(base, CUDA_VISIBLE_DEVICES=""))]
    assert truth[0] == truth[1] == "False 0\n", truth  # the variable changes nothing torch does here
    env = dict(base, CUDA_VISIBLE_DEVICES="")
    doc = _status(py, env)
    assert doc["verdicts"]["cuda-visible-devices-hides-all"] == "ok"
    for _ in ("cold", "warm"):
        p = subprocess.run([str(py), "-c", "import torch"], capture_output=True, text=True, cwd="/", timeout=300,
                           env=env, start_new_session=True)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "CUDA_VISIBLE_DEVICES" not in p.stderr, p.stderr


# -- torch 1.10: nothing to shadow ------------------------------------------------------------


SHARED_CUDA = re.compile(r"^lib(cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|cudnn|nvrtc|nvJitLink|nccl|nvToolsExt)\.so(\.\d+)*$")


def test_torch_110_has_nothing_to_shadow_so_lib_rules_are_ok(tmp_path):
    py = _venv("torch-110")
    lib = _site("torch-110") / "torch" / "lib"
    needed = set()
    for so in lib.glob("*.so*"):
        out = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
        needed |= set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))
    assert any(n.startswith("libcudart-") for n in needed)  # bundled under a hashed name
    assert not [n for n in needed if SHARED_CUDA.match(n)], needed  # nothing by a shared soname
    doc = _status(py, _env(tmp_path))
    assert doc["verdicts"]["lib-shadowed"] == "ok" and doc["verdicts"]["nccl-shadowed"] == "ok"
    assert not [u for u in doc["unknown"] if u["rule"] in ("lib-shadowed", "nccl-shadowed")]


# -- check --strict -----------------------------------------------------------------------------


def test_strict_names_each_warning_and_unknown_that_failed_it(tmp_path):
    require((CUDA13 / "bin" / "nvcc").exists(), "the CUDA 13.0 toolkit at /usr/local/cuda-13.0")
    py = _venv("torch-110")
    env = _env(tmp_path, PATH="%s:%s" % (CUDA13 / "bin", os.environ.get("PATH", "")))
    doc = _status(py, env)
    want = ["warning %s [%s]" % (f["rule"], f["subject"]) if f["subject"] else "warning " + f["rule"]
            for f in doc["findings"] if f["severity"] == "warning"]
    want += ["unknown %s [%s]" % (u["rule"], u["subject"]) if u["subject"] else "unknown " + u["rule"] for u in doc["unknown"]]
    assert want and not [f for f in doc["findings"] if f["severity"] == "error"]
    r = run_cudafix(py, "check", "--strict", env=env, timeout=300)
    assert r.returncode == 1
    tail = r.stdout.split("--strict: exit 1 because of ", 1)
    assert len(tail) == 2, r.stdout
    listed = []  # one item per "  warning|unknown ..." line; deeper-indented lines continue it (80 columns)
    for ln in tail[1].splitlines()[1:]:
        if ln.startswith("   ") and listed:
            listed[-1] += " " + ln.strip()
        elif ln.strip():
            listed.append(ln.strip())
    assert listed == want
    assert "no problems found" not in r.stdout


def test_check_without_findings_but_with_unknowns_does_not_say_no_problems(tmp_path):
    from cudafix.model.findings import UNKNOWN, Outcome, Rule, RuleRun
    from cudafix.render import report

    rule = Rule(id="x", severity="error", title="t", check=lambda s: [])
    text = report.render_check([RuleRun(rule, [Outcome(UNKNOWN, "undecided", subject="s")])], strict=True)
    assert "no problems found" not in text
    assert text.rstrip().splitlines()[-1].strip() == "unknown x [s]"


# -- ./run status --json ------------------------------------------------------------------------


def test_run_status_json_is_one_document():
    env = dict(os.environ, CUDAFIX_RUN_PYTHON=sys.executable)
    r = subprocess.run([str(REPO / "run"), "status", "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # the whole stdout: one document, nothing before or after
    assert doc["schema"] == "cudafix.status/1"


@pytest.mark.parametrize("args", [["status", "--json"], ["check", "--json"], ["check", "--strict", "--json"],
                                  ["fix", "--json"], ["fix", "--json", "--apply", "--yes"]])
def test_every_json_output_is_exactly_one_document(args, tmp_path):
    """`--json` prints exactly one JSON document on stdout, whatever else happens (prose: stderr)."""
    from tests.conftest import FIXTURES, run_dev_cudafix

    for snap in (FIXTURES / "yolov9" / "yolov9-h100-conda-nocudahome.json", REPO / "cudafix" / "data" / "examples" / "h200-torch2.11-cu130.json"):
        r = run_dev_cudafix(*args, "--from", str(snap), env=_env(tmp_path))
        assert r.returncode in (0, 1, 3, 4), (args, r.returncode, r.stderr[-1000:])
        json.loads(r.stdout)  # the whole stdout
