"""WSL 2 trees (tests/wsltree.py, tests/fixtures/wsl/SOURCES.md) through the probes, the rules, the
real ldconfig, `status` / `check`, activation and the import hook."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from cudafix import probes, rules
from cudafix.model.findings import ERROR, INFO, WARNING
from cudafix.probes.machine.wsl import probe_wsl
from cudafix.store.paths import probe_root
from tests import wsltree
from tests.conftest import REPO, require

WSL_RULES = ("wsl-driver", "wsl-libcuda-not-symlink", "wsl-libcuda-unversioned", "wsl-libcuda-shadowed")
VENVS = os.path.expanduser(os.environ.get("CUDAFIX_TEST_VENVS") or "~/.cache/cudafix-venvs")


def venv_python(name):
    py = os.path.join(VENVS, name, "bin", "python")
    require(os.path.exists(py) and any(f.startswith(".cudafix-ready") for f in os.listdir(os.path.join(VENVS, name))),
            "venv %s not built (tests/make_venvs.sh)" % name)
    return py


def verdicts(snap):
    out = {}
    for run in rules.run(snap):
        if run.rule.id in WSL_RULES:
            sev = {o.severity or run.rule.severity for o in run.outcomes if o.verdict == "problem"}
            out[run.rule.id] = (run.verdict, sev.pop() if sev else None, run)
    return out


def snapshot(tmp_path, scenario, python=None):
    root, env, err = wsltree.build(tmp_path, scenario)
    snap = probes.take_snapshot(python=python, env=env, root=str(root), scan_arch=False, scan_extensions=False)
    return snap, root, env, err


def test_probe_root_from_one_place(tmp_path):
    assert probe_root({}) == "/"
    assert probe_root({"CUDAFIX_ROOT": str(tmp_path)}) == str(tmp_path)
    assert probe_root({"CUDAFIX_ROOT": "relative/dir"}) == "/"  # only an absolute, existing directory
    assert probe_root({"CUDAFIX_ROOT": str(tmp_path / "missing")}) == "/"


def test_detection_and_driver_on_wsl_trees(tmp_path):
    snap, root, env, _ = snapshot(tmp_path, "stock")
    assert snap.wsl.detected and snap.driver.wsl and snap.hardware.dxg
    assert any("microsoft-standard-WSL2" in e for e in snap.wsl.evidence)
    assert snap.driver.kernel_version is None and "WSL 2" in snap.driver.unknown["kernel_version"]
    assert snap.driver.libcuda_path.endswith("/usr/lib/wsl/lib/libcuda.so.1")
    assert snap.driver.cuda_version == 12060  # cuDriverGetVersion of the tree's libcuda (no cuInit)
    assert snap.wsl.driver_store == ["/" + wsltree.STORE]
    native, _, _, _ = snapshot(tmp_path, "not-wsl")
    assert not native.wsl.detected and not native.driver.wsl


def test_no_driver_rules_stay_quiet_on_wsl(tmp_path):
    snap, _, _, _ = snapshot(tmp_path, "stock", python=venv_python("torch-251"))
    by_id = {r.rule.id: r for r in rules.run(snap)}
    assert by_id["no-driver"].verdict == "ok"
    assert by_id["driver-library-mismatch"].verdict == "ok"
    assert by_id["wsl-driver"].verdict == "ok"


@pytest.mark.parametrize("scenario", wsltree.SCENARIOS)
def test_real_ldconfig_agrees_with_the_not_symlink_rule(tmp_path, scenario):
    snap, root, env, err = snapshot(tmp_path, scenario)
    warned = "/usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link" in err  # glibc ldconfig's own message
    v = verdicts(snap)["wsl-libcuda-not-symlink"]
    assert (v[0] == "problem") == warned, (scenario, err)
    if warned:
        assert v[1] == INFO
    # What the probe read from the tree's ld.so.cache is what `ldconfig -p` lists for libcuda.so.
    listed = subprocess.run(["ldconfig", "-p", "-C", str(root / "etc/ld.so.cache")], capture_output=True, text=True).stdout
    unv = re.findall(r"^\s+libcuda\.so \(libc6,x86-64\) => (\S+)$", listed, re.M)
    if scenario != "not-wsl" and not env.get("LD_LIBRARY_PATH"):
        assert (snap.wsl.unversioned_via == "ld.so.cache") == bool(unv)
        first = re.findall(r"^\s+libcuda\.so\.1 \(libc6,x86-64\) => (\S+)$", listed, re.M)
        assert snap.wsl.found_via["libcuda.so.1"].startswith(first[0] + " ")


def test_the_not_symlink_fix_silences_real_ldconfig(tmp_path):
    """The printed commands, run with their paths under the tree: ldconfig stops warning and caches libcuda.so."""
    _, root, _, err = snapshot(tmp_path, "stock")
    assert "is not a symbolic link" in err
    lib2 = root / "usr/lib/wsl/lib2"
    lib2.mkdir()
    for f in sorted((root / "usr/lib/wsl/lib").iterdir()):  # ln -sf /usr/lib/wsl/lib/* /usr/lib/wsl/lib2/
        (lib2 / f.name).symlink_to("/usr/lib/wsl/lib/" + f.name)
    (root / "etc/ld.so.conf.d/ld.wsl.conf").write_text("/usr/lib/wsl/lib2\n")
    proc = wsltree.ldconfig(root)
    assert proc.returncode == 0 and "not a symbolic link" not in proc.stderr, proc.stderr
    listed = subprocess.run(["ldconfig", "-p", "-C", str(root / "etc/ld.so.cache")], capture_output=True, text=True).stdout
    assert "libcuda.so (libc6,x86-64) => /usr/lib/wsl/lib2/libcuda.so" in listed


EXPECT = {  # scenario -> {rule: (verdict, severity)} for a CUDA torch without cuDNN 8 (torch 2.5.1, cuDNN 9)
    "healthy": {"wsl-driver": ("ok", None), "wsl-libcuda-not-symlink": ("ok", None), "wsl-libcuda-unversioned": ("ok", None),
                "wsl-libcuda-shadowed": ("ok", None)},
    "stock": {"wsl-libcuda-not-symlink": ("problem", INFO), "wsl-libcuda-shadowed": ("ok", None), "wsl-driver": ("ok", None)},
    # the real ldconfig orders ld.wsl.conf's directory first: the Linux driver's copy is present, not picked
    "linux-driver": {"wsl-libcuda-shadowed": ("problem", WARNING)},
    "linux-driver-ldpath": {"wsl-libcuda-shadowed": ("problem", ERROR)},
    "stub": {"wsl-libcuda-shadowed": ("problem", WARNING), "wsl-libcuda-unversioned": ("ok", None)},
    "no-dxg": {"wsl-driver": ("problem", ERROR)},
    "not-wsl": {r: ("ok", None) for r in WSL_RULES},
}


@pytest.mark.parametrize("scenario", sorted(EXPECT))
def test_rule_verdicts(tmp_path, scenario):
    snap, root, env, _ = snapshot(tmp_path, scenario, python=venv_python("torch-251"))
    got = verdicts(snap)
    for rule, want in EXPECT[scenario].items():
        assert got[rule][:2] == want, (rule, [o.message for o in got[rule][2].outcomes])


def test_shadow_fix_preloads_the_mapped_libcuda(tmp_path):
    snap, _, _, _ = snapshot(tmp_path, "linux-driver-ldpath")
    (out,) = [o for o in verdicts(snap)["wsl-libcuda-shadowed"][2].outcomes if o.verdict == "problem"]
    assert "535.104.05" in " ".join(out.evidence)
    fix = out.fix
    assert fix.auto and [(p.soname, p.path) for p in fix.preload] == [("libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")]
    assert [(op.op, op.value) for op in fix.env.ops] == [("remove-path", "/usr/lib/x86_64-linux-gnu")]
    (cmd,) = [c for c in fix.commands if c.startswith("export ")]  # pasted into bash, it drops exactly that entry
    out = subprocess.run(["bash", "-c", cmd + '; printf "%s" "$LD_LIBRARY_PATH"'], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/a:/usr/lib/x86_64-linux-gnu:/opt/b"}, timeout=30)
    assert out.stdout == "/opt/a:/opt/b", out.stderr
    present, _, _, _ = snapshot(tmp_path / "p", "linux-driver")  # packaged Linux driver, not on LD_LIBRARY_PATH
    (out,) = [o for o in verdicts(present)["wsl-libcuda-shadowed"][2].outcomes if o.verdict == "problem"]
    assert out.fix.commands == ("sudo apt-get remove --purge 'libnvidia-compute-*'", "sudo ldconfig")


def test_cudnn8_unversioned_lookup(tmp_path):
    """torch 2.0.1 needs libcudnn.so.8 (its DT_NEEDED): on the stock layout dlopen("libcuda.so") finds nothing."""
    py = venv_python("torch-201")
    stock, _, _, _ = snapshot(tmp_path / "a", "stock", python=py)
    v = verdicts(stock)["wsl-libcuda-unversioned"]
    assert v[:2] == ("problem", ERROR), [o.message for o in v[2].outcomes]
    (out,) = [o for o in v[2].outcomes if o.verdict == "problem"]
    assert out.fix.auto and out.fix.applies_in == "activation"
    assert [(op.op, op.name, op.value) for op in out.fix.env.ops] == [("prepend-path", "LD_LIBRARY_PATH", "/usr/lib/wsl/lib")]
    healthy, _, _, _ = snapshot(tmp_path / "b", "healthy", python=py)  # symlinked: ldconfig caches libcuda.so
    assert verdicts(healthy)["wsl-libcuda-unversioned"][0] == "ok"
    stub, _, _, _ = snapshot(tmp_path / "c", "stub", python=py)  # cuDNN 8 would get the stub
    assert verdicts(stub)["wsl-libcuda-shadowed"][:2] == ("problem", ERROR)


def cli(root, env, *args, python=None):
    e = {"PATH": "/usr/bin:/bin", "HOME": str(root.parent), "PYTHONPATH": str(REPO), "CUDAFIX_ROOT": str(root),
         "XDG_CACHE_HOME": str(root.parent / "cache")}
    e.update(env)
    cmd = [sys.executable, "-m", "cudafix"] + list(args) + (["--python", python] if python else [])
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300)


def test_status_and_check_on_the_trees(tmp_path):
    py = venv_python("torch-251")
    gpu = ["--assume-gpu", "NVIDIA GeForce RTX 3060 Ti"]  # WSL names GPUs through NVML only (none in a tree)
    root, env, _ = wsltree.build(tmp_path / "h", "healthy")
    strict = cli(root, env, "check", "--strict", *gpu, python=py)
    assert strict.returncode == 0, strict.stdout + strict.stderr
    st = cli(root, env, "status", *gpu, python=py)
    assert st.returncode == 0 and "WSL" in st.stdout and "wsl-" not in st.stdout, st.stdout
    root, env, _ = wsltree.build(tmp_path / "l", "linux-driver-ldpath")
    chk = cli(root, env, "check", "--json", *gpu, python=py)
    assert chk.returncode == 1, chk.stderr
    data = json.loads(chk.stdout)
    rows = data["findings"] if isinstance(data, dict) else data
    assert any(f["rule"] == "wsl-libcuda-shadowed" and f["severity"] == ERROR for f in rows)


def findings_of(tmp_path, scenario, python):
    snap, root, env, _ = snapshot(tmp_path, scenario, python=python)
    return rules.findings(rules.run(snap)), env


def test_import_hook_speaks_only_about_the_runtime_failures(tmp_path):
    from cudafix.hook import plan as hookplan

    py = venv_python("torch-251")
    for scenario, want in (("healthy", set()), ("stock", set()), ("linux-driver-ldpath", {"wsl-libcuda-shadowed"})):
        found, env = findings_of(tmp_path / scenario, scenario, py)
        entry = hookplan.build_entry(found, env, [])
        wsl_warns = {w[0] for w in entry.warns if w[0].startswith("wsl-")}
        assert wsl_warns == want, (scenario, entry.warns)
        if want:
            (w,) = [w for w in entry.warns if w[0] == "wsl-libcuda-shadowed"]
            assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in w[3]
    cudnn8, env = findings_of(tmp_path / "c8", "stock", venv_python("torch-201"))
    entry = hookplan.build_entry(cudnn8, env, [])
    (w,) = [w for w in entry.warns if w[0] == "wsl-libcuda-unversioned"]
    assert "Corrected for this process" not in w[2] and "/usr/lib/wsl/lib" in w[3]  # the loader read LD_LIBRARY_PATH at start


def _bash(script: str, env: dict) -> str:
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_activation_fixes_and_restores_exactly(tmp_path):
    from cudafix.activation.plan import plan_from_findings
    from cudafix.activation.shells import sh

    require(subprocess.run(["bash", "--version"], capture_output=True).returncode == 0, "no bash")
    healthy, env = findings_of(tmp_path / "h", "healthy", venv_python("torch-251"))
    assert plan_from_findings(healthy, env).changes == ()
    cudnn8, env = findings_of(tmp_path / "c8", "stock", venv_python("torch-201"))
    plan = plan_from_findings([f for f in cudnn8 if f.rule.startswith("wsl-")], env)
    assert dict(plan.changes) == {"LD_LIBRARY_PATH": "/usr/lib/wsl/lib"}
    shadow, env = findings_of(tmp_path / "ld", "linux-driver-ldpath", venv_python("torch-251"))
    plan2 = plan_from_findings([f for f in shadow if f.rule.startswith("wsl-")], env)
    assert dict(plan2.changes) == {"LD_LIBRARY_PATH": None}  # its only entry was the Linux driver's directory
    for p, before in ((plan, None), (plan2, "/usr/lib/x86_64-linux-gnu")):  # each plan in the env it was made for
        e = {"PATH": "/usr/bin:/bin"}
        if before is not None:
            e["LD_LIBRARY_PATH"] = before
        show = 'printf "%s|%s\\n" "${LD_LIBRARY_PATH-UNSET}" "${LD_LIBRARY_PATH+set}"'
        out = _bash("%s\n%s\n%s\n%s\n%s" % (show, sh.activate(p), show, sh.deactivate(), show), e)
        first, during, after = out.strip().splitlines()
        assert first == after  # exact restore, unset vs set included
        if p is plan:
            assert during.split("|")[0].startswith("/usr/lib/wsl/lib")
        else:
            assert during == "UNSET|"


def test_the_real_import_hook_on_the_trees(tmp_path):
    """`import torch` (torch 2.5.1) in a venv with cudafix installed, the probes reading a WSL tree:
    the hook warns about the shadowing Linux-driver libcuda (cold and warm cache) and is silent on
    the healthy tree."""
    from tests.test_startup_helpers import clean_env, make_venv, run, site_packages

    torch_site = site_packages(pathlib.Path(venv_python("torch-251")).parent.parent)
    py = make_venv(tmp_path / "venv", deps=[torch_site])
    for scenario, want in (("healthy", False), ("linux-driver-ldpath", True)):
        root, tenv, _ = wsltree.build(tmp_path, scenario)
        env = clean_env(tmp_path / ("cache-" + scenario), CUDAFIX_ROOT=str(root), **tenv)
        for cache in ("cold", "warm"):
            p = run(py, "import torch", env, timeout=300)
            assert p.returncode == 0, p.stderr[-2000:]
            warned = [ln for ln in p.stderr.splitlines() if "CudafixWarning" in ln]
            wsl = [ln for ln in warned if "[wsl-libcuda-shadowed]" in ln]
            assert bool(wsl) == want and (want or not warned), (scenario, cache, p.stderr)
            if want:
                assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in wsl[0]
