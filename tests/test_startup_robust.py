"""Hostile inputs for the startup hook in real interpreters: random env values (non-UTF-8 bytes,
huge values, odd separators) and corrupt / truncated caches.  Zero exceptions, zero stray
output, the interpreter always starts, and `import torch` always proceeds."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudafix.hook import cache as hookcache
from tests.test_startup_helpers import clean_env, make_venv, stub_torch

NAMES = ["LD_LIBRARY_PATH", "PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_CACHE_MAXSIZE",
         "PYTORCH_CUDA_ALLOC_CONF", "HOME", "XDG_CACHE_HOME", "CUDAFIX_MODE", "CUDAFIX_SKIP", "CUDAFIX_WARNED",
         "CUDA_CACHE_PATH", "TORCH_CUDA_ARCH_LIST", "CONDA_PREFIX"]
values = st.one_of(
    st.binary(max_size=64).map(lambda b: b.replace(b"\0", b"")),
    st.sampled_from([b"", b":", b"::", b",", b"=", b"\xff\xfe", b"/nonexistent:/", b"\n", b"0", b"1", b"fix", b"warn", b"off",
                     b"a" * 100000, b":" * 50000, b"\xed\xa0\x80", b"/tmp", b"relative/dir"]),
)
CODE = "import torch, sys; sys.stdout.write('ok')"


@pytest.fixture(scope="module")
def stub_python(tmp_path_factory):
    root = tmp_path_factory.mktemp("robust")
    return make_venv(root / "v", deps=[stub_torch(root / "s", version="2.5.1", cuda=None)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(st.sampled_from(NAMES), values, max_size=6))
def test_random_env_values(stub_python, tmp_path_factory, extra):
    base = clean_env(tmp_path_factory.mktemp("cache"))
    env = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in base.items()}
    env.update({k.encode(): v for k, v in extra.items()})
    env.pop(b"CUDAFIX_DEBUG", None)
    p = subprocess.run([str(stub_python), "-c", CODE], env=env, capture_output=True, timeout=120, cwd="/")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"ok", b""), p.stderr[-3000:]


def _cache_path(python, env):
    p = subprocess.run([str(python), "-c", "import cudafix.hook.runtime as h; print(h.check().cache_path)"], env=env,
                       capture_output=True, text=True, timeout=60, cwd="/")
    return p.stdout.strip()


GOOD = hookcache.dump_entries([hookcache.Entry("1.2.3", "1.2.3", [("/x", None)], [("r", "set", "CUDA_HOME", "/c")],
                                     [("r", "libx.so", "/nonexistent/libx.so")], [("r", False, "a", "b")])])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=300), st.integers(0, len(GOOD)).map(lambda n: GOOD[:n]),
                      st.binary(max_size=100).map(lambda b: b'{"version":2,"entries":' + b + b"}")),
       mode=st.sampled_from([0o600, 0o666, 0o000]))
def test_corrupt_truncated_unreadable_caches(stub_python, tmp_path_factory, data, mode):
    env = clean_env(tmp_path_factory.mktemp("cache"))
    path = _cache_path(stub_python, env)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)
    p = subprocess.run([str(stub_python), "-c", CODE], env=env, capture_output=True, timeout=120, cwd="/")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"ok", b""), p.stderr[-3000:]
    if mode == 0o600:  # a bad cache of ours is replaced by a whole one
        assert hookcache.read_cache(path)[1] is None


# The check (hookenv.check, at `import torch` or when called) computes the fingerprint
# from the start's sys.path (saved by the finder), and the cold path writes entries with
# hookenv's plain versions.  They must agree, or the cache would never be fresh: for os.environ, and for a plain dict of it (what
# hookplan.build_entry fingerprints after the entry's corrections).
SAME = r"""
import os, sys
from cudafix.hook import cache as hookcache
from cudafix.hook import runtime as hook
from cudafix.hook import runtime as hookenv
st = hook.check()
sys.stdout.write(repr([st.syspath == hookcache.path_part(sys.path[1:]),
                       st.fp == hookcache.fingerprint(os.environ, st.syspath),
                       st.fp == hookcache.fingerprint(dict(os.environ), st.syspath),
                       st.cache_path == os.path.join(hookcache.cache_dir(sys.prefix, os.environ), hookcache.CACHE_FILE)]))
"""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(st.sampled_from(NAMES + ["CUDA_MODULE_LOADING", "VIRTUAL_ENV", "PYTHONPATH"]), values, max_size=6))
def test_start_computes_what_hookenv_computes(stub_python, tmp_path_factory, extra):
    base = clean_env(tmp_path_factory.mktemp("cache"))
    env = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in base.items()}
    env.update({k.encode(): v for k, v in extra.items() if k not in ("CUDAFIX_MODE", "CUDAFIX_DEBUG", "PYTHONPATH")})
    p = subprocess.run([str(stub_python), "-c", SAME], env=env, capture_output=True, timeout=120, cwd="/")
    assert (p.returncode, p.stderr) == (0, b""), p.stderr[-3000:]
    assert p.stdout == b"[True, True, True, True]", (p.stdout, extra)


@pytest.mark.parametrize("xdg,home", [("/x/", "/h"), ("/x//y", None), ("rel", "/h/"), ("", "/h"), (None, None), (None, "rel")])
def test_start_cache_path_edge_cases(stub_python, tmp_path, xdg, home):
    env = {k: v for k, v in clean_env(tmp_path).items() if k not in ("XDG_CACHE_HOME", "HOME")}
    if xdg is not None:
        env["XDG_CACHE_HOME"] = xdg
    if home is not None:
        env["HOME"] = home
    p = subprocess.run([str(stub_python), "-c", SAME], env=env, capture_output=True, timeout=120, cwd="/")
    assert (p.returncode, p.stderr, p.stdout) == (0, b"", b"[True, True, True, True]")
