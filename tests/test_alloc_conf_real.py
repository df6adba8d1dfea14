"""PYTORCH_CUDA_ALLOC_CONF against torch's OWN parser on the real test venvs (tests/make_venvs.sh).

- docs/alloc-conf.md is re-generated from a real run and must be unchanged, with no cell where
  cudafix contradicts torch (tools.alloc_conf_proof).
- The option names the probe reads from each torch's libraries are exactly the names that
  torch's parser does not answer with "Unrecognized ...".
- The issue's proof: in the torch 2.14.1 venv with the hook installed,
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,bogus_key:1 reads expandable_segments:True
  after `import torch`, and torch's parser accepts it.
"""

from __future__ import annotations

import os

import pytest

from tools import alloc_conf_proof as proof
from cudafix.knowledge.alloc_conf import KNOWN_NAMES
from cudafix.probes.pyenv.alloc_conf import read_alloc_keys
from tests.conftest import REPO
from tests.test_startup_helpers import TORCH_CU_SITE, clean_env, make_venv, run

IN_CI = os.environ.get("CI") == "true"


def _venvs():
    root = proof.venv_root()
    out = []
    for name, how in proof.VENVS:
        tdir = proof.torch_dir(os.path.join(root, name))
        if tdir is None:
            if IN_CI:
                pytest.fail("test venv %s missing: tests/make_venvs.sh builds it" % name)
            continue
        out.append((name, how, tdir))
    return out


def test_doc_table_regenerates_from_torchs_own_parsers():
    if not IN_CI and len(_venvs()) < len(proof.VENVS):
        pytest.skip("not every proof venv is built here (tests/make_venvs.sh)")
    rows = proof.run(proof.venv_root(), require_all=True)
    wrong = [r for r in rows if proof.contradicts(r)]
    assert wrong == []
    assert len({r["torch"] for r in rows}) >= 4
    assert proof.render(rows) == (REPO / "docs" / "alloc-conf.md").read_text()


# the CUDA builds (torch-cpu has no CUDA allocator parser to compare with)
@pytest.mark.parametrize("name", [v[0] for v in proof.VENVS if v[1] != "env"])
def test_probe_names_equal_the_names_torchs_parser_knows(name):
    found = {v[0]: v for v in _venvs()}
    if name not in found:
        pytest.skip("venv %s not built here" % name)
    _, how, tdir = found[name]
    version, cuda = proof.torch_version(tdir)
    assert cuda
    names = list(KNOWN_NAMES) + ["bogus_key"]
    # the value "x" is wrong for every key: only the *kind* of error tells a key from a non-key
    verdicts = proof.torch_verdicts(os.path.join(proof.venv_root(), name), how, ["%s:x" % n for n in names])
    torch_knows = {n for n in names if "Unrecognized" not in verdicts["%s:x" % n][1]}
    info = read_alloc_keys(tdir, names)
    assert info.unknown is None
    assert set(info.accepted) == torch_knows, (version, info.accepted, sorted(torch_knows))
    assert set(info.rejected) == set(names) - torch_knows
    assert info.uncertain == []


def test_probe_cache_answers_the_same(tmp_path):
    found = {v[0]: v for v in _venvs()}
    if "torch-cu" not in found:
        pytest.skip("torch-cu venv not built here")
    tdir = found["torch-cu"][2]
    cold = read_alloc_keys(tdir, ["expandable_segments", "bogus_key"], cache_dir=str(tmp_path))
    warm = read_alloc_keys(tdir, ["expandable_segments", "bogus_key"], cache_dir=str(tmp_path))
    assert (cold.accepted, cold.rejected) == (warm.accepted, warm.rejected) == (["expandable_segments"], ["bogus_key"])
    assert "(cached)" in warm.found_via and "(cached)" not in cold.found_via


AFTER_IMPORT = ("import os, torch; v = os.environ.get('PYTORCH_CUDA_ALLOC_CONF'); print(v)\n"
                "torch.cuda.memory._set_allocator_settings(v); print('torch accepts it')")


def test_hook_drops_the_rejected_key_at_import_torch(tmp_path):
    if not TORCH_CU_SITE.is_dir():
        pytest.fail("torch-cu venv missing: tests/make_venvs.sh builds it")
    py = make_venv(tmp_path / "v", deps=[TORCH_CU_SITE])
    env = clean_env(tmp_path / "cache", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True,bogus_key:1")
    p = run(py, AFTER_IMPORT, dict(env, CUDAFIX_DISABLE="1"), timeout=300)
    assert p.returncode != 0 and "Unrecognized key 'bogus_key'" in p.stderr  # without cudafix
    for cache in ("cold", "warm"):
        p = run(py, AFTER_IMPORT, env, timeout=300)
        assert p.returncode == 0, (cache, p.stderr[-2000:])
        assert p.stdout.splitlines() == ["expandable_segments:True", "torch accepts it"], (cache, p.stdout)


def test_activation_drops_the_rejected_key_in_a_real_shell(tmp_path):
    if not TORCH_CU_SITE.is_dir():
        pytest.fail("torch-cu venv missing: tests/make_venvs.sh builds it")
    py = make_venv(tmp_path / "v", deps=[TORCH_CU_SITE])
    env = clean_env(tmp_path / "cache", PY=str(py), CUDAFIX_QUIET="1",
                    PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:512, bogus_key:1,expandable_segments:True")
    import subprocess

    p = subprocess.run(["sh", "-c", 'eval "$("$PY" -m cudafix shell --shell sh --activate)" && printf "%s\\n" "$PYTORCH_CUDA_ALLOC_CONF"'],
                       env=env, capture_output=True, text=True, cwd="/", timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["max_split_size_mb:512,expandable_segments:True"]
    verdicts = proof.torch_verdicts(os.path.join(proof.venv_root(), "torch-cu"), "setter",
                                    [p.stdout.strip(), env["PYTORCH_CUDA_ALLOC_CONF"]])
    assert verdicts[p.stdout.strip()][0] == "accepted"
    assert verdicts[env["PYTORCH_CUDA_ALLOC_CONF"]][0] == "rejected"
