"""The hook against real failures with real wheels and the real rules (cold cache, then warm).

(a) failure catalogue F1 for real (tests/shadowing.py): torch 2.5.1+cu124 with an older
    libnvJitLink.so.12 on LD_LIBRARY_PATH -- `import torch` fails without cudafix and succeeds
    with cudafix installed, the warning naming the shadowing file.
(b) a cold-path correction (cuda-home-mismatch: CUDA_HOME at a CUDA 12.1 toolkit, torch cu130,
    the machine's /usr/local/cuda-13.0 installed) is in os.environ when `import torch` begins.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from cudafix import rules
from tests import shadowing
from tests.conftest import require
from tests.test_startup_helpers import TORCH_CU_SITE, clean_env, make_venv, run, site_packages

SHOW_LOADED = ("import torch; print([l.split()[-1] for l in open('/proc/self/maps') if 'libnvJitLink' in l][0])")


def _need_rule(rule_id):
    # never a skip: a renamed rule must not silently drop the only end-to-end test of its repair
    assert rule_id in rules.BY_ID, "rule %s is not registered: renamed? update this test" % rule_id


@pytest.fixture(scope="module")
def f1(tmp_path_factory):
    _need_rule("lib-shadowed")
    sc = shadowing.torch_251_nvjitlink_scenario()
    torch_site = site_packages(pathlib.Path(sc.python).parent.parent)
    root = tmp_path_factory.mktemp("f1")
    return sc, make_venv(root / "without", cudafix=False, deps=[torch_site]), make_venv(root / "with", deps=[torch_site])


def test_shadowed_nvjitlink_breaks_torch_without_cudafix_and_not_with_it(f1, tmp_path):
    sc, without, with_ = f1
    env = clean_env(tmp_path / "cache", LD_LIBRARY_PATH=sc.ld_library_path)

    p = run(without, "import torch", env, timeout=300)
    assert p.returncode != 0 and sc.expected_error in p.stderr
    p = run(with_, "import torch", dict(env, CUDAFIX_DISABLE="1"), timeout=300)
    assert p.returncode != 0 and sc.expected_error in p.stderr  # it is cudafix that makes the difference

    for cache in ("cold", "warm"):
        p = run(with_, SHOW_LOADED, env, timeout=300)
        assert p.returncode == 0, (cache, p.stderr[-2000:])
        loaded = p.stdout.strip()
        assert loaded != str(sc.shadow_file) and loaded.endswith("/nvidia/nvjitlink/lib/libnvJitLink.so.12"), loaded
        warned = [ln for ln in p.stderr.splitlines() if "CudafixWarning" in ln and "[lib-shadowed]" in ln]
        assert len(warned) == 1, (cache, p.stderr)
        assert str(sc.shadow_file) in warned[0] and "Corrected for this process" in warned[0]


def test_cold_path_correction_visible_when_import_torch_begins(tmp_path):
    _need_rule("cuda-home-mismatch")
    require(pathlib.Path("/usr/local/cuda-13.0").is_dir(), "needs the CUDA 13.0 toolkit at /usr/local/cuda-13.0")
    fake = tmp_path / "cuda-12.1"
    (fake / "bin").mkdir(parents=True)
    (fake / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.1.105"}}))
    py = make_venv(tmp_path / "v", deps=[TORCH_CU_SITE])
    env = clean_env(tmp_path / "cache", CUDA_HOME=str(fake))
    from tests.test_startup_process import AT_IMPORT

    for cache in ("cold", "warm"):
        p = run(py, AT_IMPORT, env, timeout=300)
        assert p.returncode == 0, p.stderr
        seen = json.loads(p.stdout.splitlines()[1])
        assert seen["CUDA_HOME"] in ("/usr/local/cuda-13.0", "/usr/local/cuda"), (cache, seen)
        assert "[cuda-home-mismatch]" not in p.stderr  # a corrected plain variable is not warned about


# Issue 18 item 2: the loader read LD_LIBRARY_PATH at exec; what the script does to os.environ
# afterwards changes nothing for the libraries torch loads, so the hook judges the exec-time value
# (/proc/self/environ).  Before the fix the first case was not repaired (the check saw no
# LD_LIBRARY_PATH) and the second warned and preloaded for a variable the loader never read.
POP = "import os; os.environ.pop('LD_LIBRARY_PATH'); " + SHOW_LOADED


def test_loader_path_dropped_in_process_is_judged_as_the_loader_read_it(f1, tmp_path):
    sc, without, with_ = f1
    env = clean_env(tmp_path / "cache", LD_LIBRARY_PATH=sc.ld_library_path)
    p = run(without, POP, env, timeout=300)
    assert p.returncode != 0 and sc.expected_error in p.stderr  # popping it does not help torch
    for cache in ("cold", "warm"):
        p = run(with_, POP, env, timeout=300)
        assert p.returncode == 0, (cache, p.stderr[-2000:])
        assert p.stdout.strip().endswith("/nvidia/nvjitlink/lib/libnvJitLink.so.12"), p.stdout
        warned = [ln for ln in p.stderr.splitlines() if "CudafixWarning" in ln and "[lib-shadowed]" in ln]
        assert len(warned) == 1 and str(sc.shadow_file) in warned[0], (cache, p.stderr)


def test_loader_path_set_in_process_only_is_not_judged(f1, tmp_path):
    sc, _, with_ = f1
    env = clean_env(tmp_path / "cache", CUDAFIX_DEBUG="1")
    code = "import os; os.environ['LD_LIBRARY_PATH'] = %r; " % sc.ld_library_path + SHOW_LOADED
    for cache in ("cold", "warm"):
        p = run(with_, code, env, timeout=300)
        assert p.returncode == 0, (cache, p.stderr[-2000:])
        assert p.stdout.strip().endswith("/nvidia/nvjitlink/lib/libnvJitLink.so.12"), p.stdout
        assert "[lib-shadowed]" not in p.stderr and "preloaded" not in p.stderr, (cache, p.stderr)
