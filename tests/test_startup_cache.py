"""The startup hook's pure parts: cache format, trust checks, fingerprint, plan building, and
their agreement with the package's own implementations (paths.env_cache_dir, EnvOp.apply)."""

from __future__ import annotations

import dataclasses

import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.hook import runtime as hook
from cudafix.hook import cache as hookcache
import cudafix
from cudafix.hook import plan as hookplan
from cudafix.store import paths
from cudafix.model.findings import Finding
from tests.conftest import require
from cudafix.model.fixes import REMOVE_PATH, SET, UNSET, EnvOp, EnvPatch, Fix, Preload

# text as os.environ can hold it: any str without NUL, incl. surrogate-escaped bytes
env_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0") | st.sampled_from(["\udc80", "\udcff", ":", "=", "\n", " "]), max_size=40)


def test_version_matches_package():
    assert hookcache.VERSION == cudafix.__version__


def test_env_names_cover_what_the_probes_read():
    from cudafix.probes.pyenv import environment

    missing = [n for n in environment.VARIABLES if n not in hookcache.ENV_NAMES]
    assert missing == []


@given(prefix=env_text.filter(bool),
       xdg=st.one_of(st.none(), st.just("/x/cache"), st.just("relative/cache"), st.just("")),
       home=st.one_of(st.none(), st.just("/home/u"), st.just("~"), st.just("")))
@settings(max_examples=200, deadline=None)
def test_cache_dir_equals_paths_env_cache_dir(prefix, xdg, home):
    env = {}
    if xdg is not None:
        env["XDG_CACHE_HOME"] = xdg
    if home is not None:
        env["HOME"] = home
    assert hookcache.cache_dir(prefix, env) == paths.env_cache_dir(prefix, env)


def test_env_key_differs_between_envs():
    keys = {paths.env_key("/opt/envs/e%d" % i) for i in range(2000)}
    assert len(keys) == 2000


# (hook.apply_op is EnvOp.apply itself now: no twin left to compare)


entries = st.builds(
    hookcache.Entry,
    st.text("0123456789abcdef.", min_size=1, max_size=30),
    st.text("0123456789abcdef.", min_size=1, max_size=30),
    st.lists(st.tuples(env_text, st.one_of(st.none(), st.lists(st.integers(0, 1 << 64), min_size=6, max_size=6))), max_size=3).map(tuple),
    st.lists(st.tuples(env_text, st.sampled_from([SET, UNSET]), env_text, st.one_of(st.none(), env_text)), max_size=3).map(tuple),
    st.lists(st.tuples(env_text, env_text, env_text), max_size=3).map(tuple),
    st.lists(st.tuples(env_text, st.booleans(), env_text, env_text), max_size=3).map(tuple),
)  # an Entry's rows are tuples (its type): the builders make them so


@given(st.lists(entries, max_size=4))
@settings(max_examples=200, deadline=None)
def test_cache_round_trip(es):
    firsts = [e for i, e in enumerate(es) if e.fp not in [x.fp for x in es[:i]]]  # one per fingerprint, newest
    assert hookcache.parse_entries(hookcache.dump_entries(es)) == firsts


def _valid_cache_bytes():
    e = hookcache.Entry("1.2.3", "4.5.6", [("/x", [1, 2, 3])], [("r", SET, "CUDA_CACHE_MAXSIZE", "4294967296")],
                   [("r", "libx.so.1", "/lib/libx.so.1")], [("r", False, "fixed", "unfixed")])
    return hookcache.dump_entries([e, dataclasses.replace(e, fp="1.2.4")])


@given(cut=st.integers(min_value=0, max_value=len(_valid_cache_bytes()) - 1))
@settings(max_examples=200, deadline=None)
def test_truncated_cache_is_rejected(cut):
    with pytest.raises(ValueError):
        hookcache.parse_entries(_valid_cache_bytes()[:cut])


@given(st.binary(max_size=400) | st.builds(lambda a, b: b'{"version":2,"entries":' + a + b"}", st.binary(max_size=200), st.none()))
@settings(max_examples=500, deadline=None)
def test_garbage_never_raises_from_read_cache(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("c")
    os.chmod(str(d), 0o700)
    p = d / hookcache.CACHE_FILE
    p.write_bytes(data)
    os.chmod(str(p), 0o600)
    entries, why = hookcache.read_cache(str(p))
    assert isinstance(entries, list)
    if not entries:
        assert why is None or isinstance(why, str)


def _cache_file(tmp_path):
    d = tmp_path / "c"
    d.mkdir(mode=0o700)
    p = d / hookcache.CACHE_FILE
    p.write_bytes(_valid_cache_bytes())
    os.chmod(str(p), 0o600)
    return d, p


def test_trusted_cache_is_read(tmp_path):
    d, p = _cache_file(tmp_path)
    entries, why = hookcache.read_cache(str(p))
    assert why is None and len(entries) == 2


def test_foreign_owned_cache_is_ignored(tmp_path):
    require(os.geteuid() == 0, "chown to another user needs root")
    d, p = _cache_file(tmp_path)
    os.chown(str(p), 65534, 65534)
    assert hookcache.read_cache(str(p)) == ([], "cache not trusted (hook.json: not a regular file of uid 0 writable only by it)")
    os.chown(str(p), 0, 0)
    os.chown(str(d), 65534, 65534)
    assert hookcache.read_cache(str(p))[0] == []


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_cache_writable_by_others_is_ignored(tmp_path, mode):
    d, p = _cache_file(tmp_path)
    os.chmod(str(p), mode)
    assert hookcache.read_cache(str(p))[0] == []
    os.chmod(str(p), 0o600)
    os.chmod(str(d), 0o777)
    assert hookcache.read_cache(str(p))[0] == []


def test_symlinked_or_special_cache_is_ignored(tmp_path):
    d, p = _cache_file(tmp_path)
    real = d / "real"
    p.rename(real)
    p.symlink_to(real)
    assert hookcache.read_cache(str(p))[0] == []
    p.unlink()
    p.mkdir()
    assert hookcache.read_cache(str(p))[0] == []


def test_oversized_cache_is_ignored(tmp_path):
    d, p = _cache_file(tmp_path)
    with open(str(p), "ab") as fh:
        fh.truncate(hookcache.MAX_CACHE_BYTES + 10)
    assert hookcache.read_cache(str(p)) == ([], "cache not trusted (hook.json: larger than %d bytes)" % hookcache.MAX_CACHE_BYTES)


def test_missing_cache(tmp_path):
    (tmp_path / "c").mkdir(mode=0o700)
    assert hookcache.read_cache(str(tmp_path / "c" / hookcache.CACHE_FILE)) == ([], "no cache yet")


def test_write_entry_creates_private_file_and_keeps_newest_first(tmp_path):
    path = str(tmp_path / "a" / "b" / hookcache.CACHE_FILE)
    e1, e2 = hookcache.Entry("1", "1"), hookcache.Entry("2", "2")
    assert hookplan.write_entry(path, e1)
    assert hookplan.write_entry(path, e2)
    assert hookplan.write_entry(path, e1)  # same fingerprint: replaced, moved first
    assert hookcache.read_cache(path) == ([e1, e2], None)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) & 0o077 == 0
    assert os.listdir(os.path.dirname(path)) == [hookcache.CACHE_FILE]  # no temp file left
    for i in range(40):
        hookplan.write_entry(path, hookcache.Entry(str(i), str(i)))
    assert len(hookcache.read_cache(path)[0]) == hookplan.MAX_ENTRIES


def test_write_entry_refuses_a_dir_others_can_write(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(str(d), 0o777)
    assert not hookplan.write_entry(str(d / hookcache.CACHE_FILE), hookcache.Entry("1", "1"))
    assert not (d / hookcache.CACHE_FILE).exists()


# -- the plan built from findings -----------------------------------------------------------

# A preload must name a file of root (or the env's owner) in directories nobody else can write
# (cudafix.store.safefs.preload_refusal): the plan tests use a real one, glibc's.
TORCH_LIB = os.path.realpath("/usr/lib/x86_64-linux-gnu/libc.so.6")
SHADOW = Finding(
    rule="lib-shadowed", severity="error",
    message="libnvJitLink.so.12 is shadowed: /old/libnvJitLink.so.12 12.3.101 wins over torch's /sp/nvidia/nvjitlink/lib/libnvJitLink.so.12 12.4.127",
    fix=Fix(summary="load torch's own libnvJitLink.so.12", auto=True, applies_in="both",
            env=EnvPatch((EnvOp(REMOVE_PATH, "LD_LIBRARY_PATH", "/old"),)),
            preload=(Preload("libnvJitLink.so.12", TORCH_LIB),)),
)
JIT = Finding(rule="jit-cache-too-small", severity="warning", message="the JIT cache (256 MiB) cannot hold the PTX",
              fix=Fix(summary="raise CUDA_CACHE_MAXSIZE", auto=True, applies_in="both",
                      env=EnvPatch((EnvOp(SET, "CUDA_CACHE_MAXSIZE", "4294967296"),))))
ADVICE = Finding(rule="driver-too-old", severity="error", message="driver 535 supports CUDA <= 12.2",
                 fix=Fix(summary="install torch built for cu121", commands=("pip install ...",)))
INFO = Finding(rule="device-order", severity="info", message="mixed GPUs")
ACTIVATION_ONLY = Finding(rule="x-activation", severity="warning", message="m",
                          fix=Fix(summary="s", auto=True, applies_in="activation", env=EnvPatch((EnvOp(SET, "CUDA_HOME", "/c"),))))


def test_plan_from_findings():
    e = hookplan.build_entry([SHADOW, JIT, ADVICE, INFO, ACTIVATION_ONLY], {"LD_LIBRARY_PATH": "/old"}, ["p"], machine=["m"])
    # LD_LIBRARY_PATH is never changed in-process (the loader read it at exec); activation-only
    # fixes are not applied in a process
    assert list(e.ops) == [("jit-cache-too-small", SET, "CUDA_CACHE_MAXSIZE", "4294967296")]
    assert list(e.preloads) == [("lib-shadowed", "libnvJitLink.so.12", TORCH_LIB)]
    warns = {w[0]: w for w in e.warns}
    assert set(warns) == {"lib-shadowed", "jit-cache-too-small", "driver-too-old", "x-activation"}
    assert warns["jit-cache-too-small"][1] is True  # a plain variable correction: quiet when applied
    assert warns["lib-shadowed"][1] is False  # a preload papers over a broken loader path: said
    assert "/old/libnvJitLink.so.12" in warns["lib-shadowed"][2] and "Corrected for this process" in warns["lib-shadowed"][2]
    assert "Corrected" not in warns["lib-shadowed"][3]
    assert "Fix: install torch built for cu121" in warns["driver-too-old"][3]
    for w in e.warns:
        assert "\n" not in w[2] + w[3] and "`cudafix status`" in w[2] and "`cudafix status`" in w[3]
    # the fingerprint after the plan's own corrections is what a child of a corrected process sees
    assert e.post_fp == hookcache.fingerprint({"LD_LIBRARY_PATH": "/old", "CUDA_CACHE_MAXSIZE": "4294967296"}, ["p"], ["m"])
    assert e.fp == hookcache.fingerprint({"LD_LIBRARY_PATH": "/old"}, ["p"], ["m"])
    assert e.fp != e.post_fp


def test_fingerprint_sensitivity():
    base = hookcache.fingerprint({"CUDA_HOME": "/a"}, ["p"], ["m"])
    assert base == hookcache.fingerprint({"CUDA_HOME": "/a", "UNRELATED": "1"}, ["p"], ["m"])
    assert base != hookcache.fingerprint({"CUDA_HOME": "/b"}, ["p"], ["m"])
    assert base != hookcache.fingerprint({}, ["p"], ["m"])
    assert hookcache.fingerprint({"CUDA_HOME": ""}, ["p"], ["m"]) != hookcache.fingerprint({}, ["p"], ["m"])  # '' is not unset
    assert base != hookcache.fingerprint({"CUDA_HOME": "/a"}, ["q"], ["m"])
    assert base != hookcache.fingerprint({"CUDA_HOME": "/a"}, ["p"], ["driver=580.95.05\n", "gpus=-"])


def test_path_part_sees_torch_install(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    before = hookcache.path_part([str(a), str(b)])
    assert before[-1] == "torch=-"
    (b / "torch").mkdir()
    (b / "torch" / "version.py").write_text("__version__ = '2.5.1'\n")
    after = hookcache.path_part([str(a), str(b)])
    assert after[-1].startswith("torch=%s:" % (b / "torch" / "version.py"))
    assert after != before


# -- the start's reader (cache.find_entry) against the entries as written ----------------------

fps = st.sampled_from(["1.2.3", "1.2.34", "4.5.6", "a.b.c", "1.2.3a"])
# (path, sig): fresh only while an absent file is still absent
FRESH, STALE = ("/nonexistent/x", None), [("/nonexistent/x", [1, 2, 3]), ("/", None)]
stats = st.lists(st.sampled_from([FRESH] + STALE), max_size=2).map(tuple)
cache_entries = st.builds(
    hookcache.Entry, fps, fps, stats,
    st.lists(st.tuples(env_text, st.sampled_from([SET, UNSET]), env_text, st.one_of(st.none(), env_text)), max_size=2).map(tuple),
    st.lists(st.tuples(env_text, env_text, env_text), max_size=2).map(tuple),
    st.lists(st.tuples(env_text, st.booleans(), env_text, env_text), max_size=2).map(tuple),
)


@given(es=st.lists(cache_entries, max_size=5), fp=fps)
@settings(max_examples=400, deadline=None)
def test_find_entry_is_the_newest_fresh_entry_naming_fp(es, fp):
    written, seen = [], set()
    for e in es:  # one entry per fingerprint, the first (newest) kept
        if e.fp not in seen:
            seen.add(e.fp)
            written.append(e)
    want = next((e for e in written if fp in (e.fp, e.post_fp) and all(x == FRESH for x in e.stats)), None)
    assert hookcache.find_entry(hookcache.dump_entries(es), fp) == want


def test_find_entry_refuses_what_is_not_whole():
    data = hookcache.dump_entries([hookcache.Entry("1.2.3", "4.5.6")])
    assert hookcache.find_entry(data, "1.2.3") == hookcache.Entry("1.2.3", "4.5.6")
    assert hookcache.find_entry(data, "4.5.6") == hookcache.Entry("1.2.3", "4.5.6")
    for bad in (data[:-1], data[:-4], data[1:], data + b"x", b"x" + data, data.replace(b'"version":2', b'"version":1'),
                data.replace(b'"deps":[]', b'"deps":[["/x"]]'), data.replace(b'"warns":[]', b'"warns":[["r",1,"a","b"]]')):
        with pytest.raises(ValueError):
            hookcache.find_entry(bad, "1.2.3")


def test_start_module_is_tiny_and_holds_no_state():
    """The start module installs the finder and nothing else: no proxy, no state (issue 17)."""
    import _cudafix_startup as start

    assert not hasattr(start, "__getattr__") and not hasattr(start, "state")
    assert sorted(n for n in vars(start) if not n.startswith("__")) == ["_find_spec", "_skip_second_pass", "_started", "run"]
