"""What keeps `cudafix status` fast: lazy command loading, the loader-simulation and nvcc result
caches (never serving a stale answer), and NVML left alone where no driver is loaded."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from cudafix.probes.loader import libraries
from cudafix.store import cachefile
from cudafix.probes.pyenv import toolkits as tk
from tests.conftest import REPO, venv_site_packages

PAST = 1_600_000_000  # an mtime far from "now": results recorded from it are not racy


def _age(*paths) -> None:
    for p in paths:
        os.utime(str(p), (PAST, PAST), follow_symlinks=False)


# -- lazy commands ---------------------------------------------------------------------------


def test_command_table_matches_the_modules():
    import importlib

    from cudafix import cli

    defined = {}
    for modname in sorted(set(cli.COMMAND_MODULES.values())):
        for cmd in importlib.import_module(modname).COMMANDS:
            defined[cmd.name] = modname
    assert defined == cli.COMMAND_MODULES
    # every module that defines commands is in the table
    for path in (REPO / "cudafix").glob("cli_*.py"):
        assert "cudafix." + path.stem in cli.COMMAND_MODULES.values(), path


def test_lazy_commands_mapping():
    import click

    from cudafix import cli

    group = cli._DefaultGroup(name="t")
    assert sorted(group.commands) == sorted(cli.COMMAND_MODULES)
    assert len(group.commands) == len(cli.COMMAND_MODULES) and "status" in group.commands
    assert group.commands.get("nope") is None and "nope" not in group.commands
    assert group.commands["status"].name == "status"
    extra = click.Command("extra", callback=lambda: None)
    group.add_command(extra)
    assert group.commands["extra"] is extra and "extra" in group.list_commands(None)
    assert dict(group.commands.items())["hooks"].name == "hooks"


def _imported_after(argv, env=None):
    # reported at exit (atexit): `status` and `check` leave by os._exit once atexit's handlers ran (cudafix.cli._leave)
    code = ("import atexit, sys, runpy; sys.argv = %r\n"
            "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            "runpy.run_module('cudafix', run_name='__main__')\n") % (["cudafix"] + argv,)
    e = dict(os.environ if env is None else env, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    line = [x for x in p.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return p, set(line.split()[1:])


def test_status_imports_only_the_report_area(tmp_path):
    p, mods = _imported_after(["status", "--json"], env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    assert json.loads(p.stdout)["schema"] == "cudafix.status/1"
    assert "cudafix.cli.analysis" in mods
    # the common forms of status and check run without click (cudafix/cli/fast.py)
    assert not {"click", "cudafix.cli.report", "cudafix.cli.group"} & mods
    assert not {"cudafix.cli.shell", "cudafix.cli.verify", "cudafix.verify"} & mods
    from cudafix.probes.machine import nvml

    if nvml.nvidia_driver_present() is None:
        assert "pynvml" not in mods


def test_help_lists_every_command():
    p, mods = _imported_after(["--help"])
    from cudafix import cli

    for name in cli.COMMAND_MODULES:
        assert "\n  %s " % name in p.stdout, name


def test_shell_fast_path_still_skips_click():
    p, mods = _imported_after(["shell", "--shell", "bash", "--deactivate"])
    assert p.stdout.strip() and "click" not in mods


# -- NVML -----------------------------------------------------------------------------------


def test_nvml_not_imported_without_a_driver(monkeypatch, tmp_path):
    from cudafix.probes.machine import gpus, nvml

    monkeypatch.setattr(nvml, "DRIVER_MARKERS", (str(tmp_path / "no-module"),))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # an import attempt would raise
    got, why = gpus.read_nvml_gpus()
    assert got is None and "no NVIDIA driver loaded" in why and "NVML not queried" in why
    info = gpus.probe_gpus({}, use_nvml=True)
    assert "nvml" in info.unknown
    (tmp_path / "no-module").mkdir()  # now a driver is "present": NVML is tried (and fails here)
    got, why = gpus.read_nvml_gpus()
    assert got is None and "not importable" in why


# -- loader simulation cache ----------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_cu_dir(torch_cu_python) -> str:
    return str(venv_site_packages(torch_cu_python) / "torch")


def _base_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("LD_")}


class _Counter:
    def __init__(self, monkeypatch):
        self.calls = 0
        real = libraries._probe

        def counted(*a, **k):
            self.calls += 1
            return real(*a, **k)

        monkeypatch.setattr(libraries, "_probe", counted)


def _entries(cache_dir) -> dict:
    return cachefile.load(str(cache_dir), libraries.LIB_CACHE_FILE, libraries._cache_version())


def _jl(info):
    return {r.soname: r for r in info.resolutions}["libnvJitLink.so.13"]


def test_warm_cache_equals_cold_run_on_the_real_venv(torch_cu_python, torch_cu_dir, tmp_path, monkeypatch):
    env = _base_env()
    exe = str(torch_cu_python)
    plain = libraries.probe_libraries(torch_cu_dir, env, executable=exe)
    n = _Counter(monkeypatch)
    cold = libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(tmp_path))
    assert n.calls == 1 and len(_entries(tmp_path)) == 1, "not stored: an input of the real venv changed < 2 s ago?"
    warm = libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(tmp_path))
    assert n.calls == 1  # served from the cache
    assert warm == cold == plain
    assert json.dumps(dataclasses.asdict(warm)) == json.dumps(dataclasses.asdict(plain))  # same order too
    assert len(warm.resolutions) >= 12
    deps = {p for p, _ in next(iter(_entries(tmp_path).values()))["deps"]}
    assert libraries.LD_SO_CACHE in deps and os.path.join(torch_cu_dir, "lib") in deps
    assert len(deps) < 400  # a re-stat of dirs and files, not of the ~3,000 candidates
    # the cache file is ours alone
    mode = os.stat(str(tmp_path / libraries.LIB_CACHE_FILE)).st_mode
    assert not mode & 0o022


def test_library_added_to_a_searched_dir_misses(torch_cu_python, torch_cu_dir, tmp_path, monkeypatch):
    shadow, cache = tmp_path / "shadow", tmp_path / "cache"
    shadow.mkdir()
    _age(shadow)
    env = dict(_base_env(), LD_LIBRARY_PATH=str(shadow))
    exe = str(torch_cu_python)
    n = _Counter(monkeypatch)
    first = libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(cache))
    assert libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(cache)) == first
    assert n.calls == 1 and _jl(first).resolved_via == "DT_RUNPATH"
    # a libnvJitLink.so.13 appears in the LD_LIBRARY_PATH dir (searched before libcusparse's RUNPATH)
    real = os.path.join(os.path.dirname(torch_cu_dir), "nvidia", "cu13", "lib", "libnvJitLink.so.13")
    shutil.copy(real, str(shadow / "libnvJitLink.so.13"))
    again = libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(cache))
    assert n.calls == 2
    assert _jl(again).resolved == str(shadow / "libnvJitLink.so.13") and _jl(again).resolved_via == "LD_LIBRARY_PATH"
    assert again == libraries.probe_libraries(torch_cu_dir, env, executable=exe)


def test_changed_ld_library_path_misses(torch_cu_python, torch_cu_dir, tmp_path, monkeypatch):
    a, b, cache = tmp_path / "a", tmp_path / "b", tmp_path / "cache"
    a.mkdir()
    b.mkdir()
    real = os.path.join(os.path.dirname(torch_cu_dir), "nvidia", "cu13", "lib", "libnvJitLink.so.13")
    shutil.copy(real, str(b / "libnvJitLink.so.13"))
    _age(b / "libnvJitLink.so.13", a, b)
    exe = str(torch_cu_python)
    n = _Counter(monkeypatch)
    in_a = libraries.probe_libraries(torch_cu_dir, dict(_base_env(), LD_LIBRARY_PATH=str(a)), executable=exe, cache_dir=str(cache))
    in_b = libraries.probe_libraries(torch_cu_dir, dict(_base_env(), LD_LIBRARY_PATH=str(b)), executable=exe, cache_dir=str(cache))
    assert n.calls == 2 and _jl(in_a).resolved_via == "DT_RUNPATH" and _jl(in_b).resolved_via == "LD_LIBRARY_PATH"
    assert in_a.ld_library_path == [str(a)] and in_b.ld_library_path == [str(b)]
    # both are kept; each is served for its own LD_LIBRARY_PATH; unset is a third key
    assert libraries.probe_libraries(torch_cu_dir, dict(_base_env(), LD_LIBRARY_PATH=str(a)), executable=exe, cache_dir=str(cache)) == in_a
    assert libraries.probe_libraries(torch_cu_dir, dict(_base_env(), LD_LIBRARY_PATH=str(b)), executable=exe, cache_dir=str(cache)) == in_b
    assert n.calls == 2
    libraries.probe_libraries(torch_cu_dir, _base_env(), executable=exe, cache_dir=str(cache))
    assert n.calls == 3
    # the library file itself rewritten in place (same dir entries): its stat changes
    with open(str(b / "libnvJitLink.so.13"), "r+b") as fh:
        fh.seek(0, 2)
        fh.write(b"\0")
    libraries.probe_libraries(torch_cu_dir, dict(_base_env(), LD_LIBRARY_PATH=str(b)), executable=exe, cache_dir=str(cache))
    assert n.calls == 4


def test_ld_so_cache_change_misses(torch_cu_dir, tmp_path, monkeypatch):
    env = _base_env()
    n = _Counter(monkeypatch)
    libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path))
    entries = _entries(tmp_path)
    (key, ent), = entries.items()
    deps = dict((p, s) for p, s in ent["deps"])
    assert deps[libraries.LD_SO_CACHE] == cachefile.stat_sig(libraries.LD_SO_CACHE)
    # what `ldconfig` does to the file (a new one renamed into place: new inode, new mtime)
    for d in ent["deps"]:
        if d[0] == libraries.LD_SO_CACHE:
            d[1] = d[1][:2] + [d[1][2] + 1] + d[1][3:]
    cachefile.store(str(tmp_path), libraries.LIB_CACHE_FILE, libraries._cache_version(), entries)
    libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path))
    assert n.calls == 2
    libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path))
    assert n.calls == 2  # rewritten with the real stat: served again


def test_dangling_symlink_target_appearing_misses(torch_cu_python, torch_cu_dir, tmp_path, monkeypatch):
    """A dir's mtime can't show a symlink's target appearing elsewhere: the link itself is re-checked."""
    shadow, elsewhere, cache = tmp_path / "shadow", tmp_path / "elsewhere", tmp_path / "cache"
    shadow.mkdir()
    elsewhere.mkdir()
    os.symlink(str(elsewhere / "libnvJitLink.so.13"), str(shadow / "libnvJitLink.so.13"))
    _age(shadow / "libnvJitLink.so.13", shadow, elsewhere)
    env = dict(_base_env(), LD_LIBRARY_PATH=str(shadow))
    exe = str(torch_cu_python)
    n = _Counter(monkeypatch)
    first = libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(cache))
    assert _jl(first).resolved_via == "DT_RUNPATH"
    shadow_mtime = os.stat(str(shadow)).st_mtime_ns
    real = os.path.join(os.path.dirname(torch_cu_dir), "nvidia", "cu13", "lib", "libnvJitLink.so.13")
    shutil.copy(real, str(elsewhere / "libnvJitLink.so.13"))
    assert os.stat(str(shadow)).st_mtime_ns == shadow_mtime
    again = libraries.probe_libraries(torch_cu_dir, env, executable=exe, cache_dir=str(cache))
    assert n.calls == 2 and _jl(again).resolved_via == "LD_LIBRARY_PATH"


def test_cwd_is_part_of_the_key_only_when_searched(torch_cu_python, torch_cu_dir, tmp_path, monkeypatch):
    d1, d2, cache = tmp_path / "d1", tmp_path / "d2", tmp_path / "cache"
    d1.mkdir()
    d2.mkdir()
    _age(d1, d2)
    exe = str(torch_cu_python)
    n = _Counter(monkeypatch)
    monkeypatch.chdir(str(d1))
    empty_entry = dict(_base_env(), LD_LIBRARY_PATH=":")  # glibc: the current directory
    libraries.probe_libraries(torch_cu_dir, empty_entry, executable=exe, cache_dir=str(cache))
    libraries.probe_libraries(torch_cu_dir, empty_entry, executable=exe, cache_dir=str(cache))
    assert n.calls == 1
    monkeypatch.chdir(str(d2))
    libraries.probe_libraries(torch_cu_dir, empty_entry, executable=exe, cache_dir=str(cache))
    assert n.calls == 2
    plain = _base_env()
    libraries.probe_libraries(torch_cu_dir, plain, executable=exe, cache_dir=str(cache))
    monkeypatch.chdir(str(d1))
    libraries.probe_libraries(torch_cu_dir, plain, executable=exe, cache_dir=str(cache))
    assert n.calls == 3  # no empty entry: the cwd does not matter


def test_racy_inputs_are_not_stored(torch_cu_python, torch_cu_dir, tmp_path, monkeypatch):
    fresh, cache = tmp_path / "fresh", tmp_path / "cache"
    fresh.mkdir()  # mtime: now
    env = dict(_base_env(), LD_LIBRARY_PATH=str(fresh))
    n = _Counter(monkeypatch)
    libraries.probe_libraries(torch_cu_dir, env, executable=str(torch_cu_python), cache_dir=str(cache))
    libraries.probe_libraries(torch_cu_dir, env, executable=str(torch_cu_python), cache_dir=str(cache))
    assert n.calls == 2 and _entries(cache) == {}


def test_bad_cache_files_are_ignored(torch_cu_dir, tmp_path, monkeypatch):
    env = _base_env()
    path = tmp_path / libraries.LIB_CACHE_FILE
    want = libraries.probe_libraries(torch_cu_dir, env)
    n = _Counter(monkeypatch)
    for text in ("{corrupt", json.dumps([1]), json.dumps({"version": 999, "entries": {}}),
                 json.dumps({"version": libraries._cache_version(), "entries": {"x": 1}})):
        path.write_text(text)
        assert libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path)) == want
    assert n.calls == 4
    # a well-formed entry with a result that does not fit LibraryInfo: recomputed
    entries = _entries(tmp_path)
    ent = [e for e in entries.values() if isinstance(e, dict)][0]
    ent["result"] = {"resolutions": [{"soname": 5}]}
    cachefile.store(str(tmp_path), libraries.LIB_CACHE_FILE, libraries._cache_version(), entries)
    assert libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path)) == want
    assert n.calls == 5
    # a cache file others can write is not trusted
    assert libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path)) == want and n.calls == 5
    os.chmod(str(path), 0o666)
    assert libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(tmp_path)) == want
    assert n.calls == 6
    # an unwritable cache dir only costs time
    ro = tmp_path / "ro"
    ro.write_text("a file, not a dir")
    assert libraries.probe_libraries(torch_cu_dir, env, cache_dir=str(ro)) == want


def test_entries_of_other_code_are_dropped_whole(torch_cu_dir, tmp_path):
    """Every edit or upgrade of the simulation's code changes the file's version: old entries,
    which could never hit again, do not pile up (each is ~40 KB to parse on every run)."""
    old = [libraries.LIB_CACHE_VERSION, "0.0.0", []]
    cachefile.store(str(tmp_path), libraries.LIB_CACHE_FILE, old, {"k%d" % i: {"deps": [], "result": {}} for i in range(5)})
    libraries.probe_libraries(torch_cu_dir, _base_env(), cache_dir=str(tmp_path))
    assert len(_entries(tmp_path)) == 1


def test_a_recorded_run_answers_as_a_direct_one(torch_cu_dir):
    """Recording goes through an explicit filesystem object (probes/loader/loaderfs.py): the same code,
    the same answer, and the record holds what the answer rests on."""
    from cudafix.probes.loader.loaderfs import RecordingFileSystem

    env = dict(_base_env(), LD_LIBRARY_PATH="/nonexistent-cudafix:")  # the empty entry: the cwd is searched
    rec = RecordingFileSystem()
    assert libraries._probe(torch_cu_dir, env, None, (), fs=rec) == libraries._probe(torch_cu_dir, env, None, ())
    deps = dict((p, s) for p, s in rec.deps())
    assert os.path.join(torch_cu_dir, "lib", "libtorch_cuda.so") in deps and libraries.LD_SO_CACHE in deps
    assert rec.cwd == os.getcwd()


def test_status_passes_the_cache_dir(torch_cu_python, tmp_path):
    from tests.conftest import run_cudafix

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    cold = run_cudafix(torch_cu_python, "status", "--json", env=env)
    warm = run_cudafix(torch_cu_python, "status", "--json", env=env)
    assert cold.returncode == warm.returncode == 0, cold.stderr
    assert list(tmp_path.glob("cudafix/envs/*/" + libraries.LIB_CACHE_FILE))
    a, b = json.loads(cold.stdout), json.loads(warm.stdout)
    assert a["snapshot"]["libraries"] == b["snapshot"]["libraries"]
    assert a["findings"] == b["findings"]


# -- nvcc --version cache ---------------------------------------------------------------------


def _script(path: pathlib.Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _fake_toolkit(tmp_path: pathlib.Path, release: str) -> pathlib.Path:
    root = tmp_path / "tk"
    (root / "bin").mkdir(parents=True)
    _script(root / "bin" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release %s, V%s.1'\n" % (release, release))
    _age(root / "bin" / "nvcc")
    return root


def test_nvcc_version_is_cached_per_binary(tmp_path):
    root, cache = _fake_toolkit(tmp_path, "12.4"), tmp_path / "cache"
    t1 = tk.read_toolkit(str(root), cache_dir=str(cache))
    t2 = tk.read_toolkit(str(root), cache_dir=str(cache))
    assert t1.version == t2.version == "12.4.1"
    assert t1.found_via == "%s --version" % t1.nvcc and t2.found_via == t1.found_via + " (cached)"
    assert tk.read_toolkit(str(root)).found_via == t1.found_via  # no cache dir: always run
    # a new nvcc in place: re-run
    _script(root / "bin" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.1'\n")
    t3 = tk.read_toolkit(str(root), cache_dir=str(cache))
    assert t3.version == "12.8.1" and not t3.found_via.endswith("(cached)")  # racy: not stored yet
    _age(root / "bin" / "nvcc")
    tk.read_toolkit(str(root), cache_dir=str(cache))
    assert tk.read_toolkit(str(root), cache_dir=str(cache)).found_via.endswith("(cached)")


def test_nvcc_wrapper_script_follows_what_it_runs(tmp_path):
    real_root, cache = _fake_toolkit(tmp_path, "12.4"), tmp_path / "cache"
    wrap = tmp_path / "wrap"
    (wrap / "bin").mkdir(parents=True)
    _script(wrap / "bin" / "nvcc", '#!/bin/sh\nexec %s "$@"\n' % (real_root / "bin" / "nvcc"))
    _age(wrap / "bin" / "nvcc")
    assert tk.read_toolkit(str(wrap), cache_dir=str(cache)).version == "12.4.1"
    assert tk.read_toolkit(str(wrap), cache_dir=str(cache)).found_via.endswith("(cached)")
    _script(real_root / "bin" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.1'\n")
    _age(real_root / "bin" / "nvcc")
    t = tk.read_toolkit(str(wrap), cache_dir=str(cache))
    assert t.version == "13.0.1" and not t.found_via.endswith("(cached)")


def test_nvcc_failures_are_not_cached(tmp_path):
    root = tmp_path / "tk"
    (root / "bin").mkdir(parents=True)
    _script(root / "bin" / "nvcc", "#!/bin/sh\necho nothing\n")
    _age(root / "bin" / "nvcc")
    t = tk.read_toolkit(str(root), cache_dir=str(tmp_path / "cache"))
    assert t.version is None and "no release line" in t.unknown
    assert not (tmp_path / "cache" / tk.NVCC_CACHE_FILE).exists()
