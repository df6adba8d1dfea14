"""Hostile parent environments against the deactivation (= restore) code, in the real shells.

A parent process controls everything a shell inherits, including cudafix's own protocol
variables (_CUDAFIX_VARS, _CUDAFIX_OLD_<name>, _CUDAFIX_NEW_<name>; docs/activation.md).  The
restore code must then touch only the variables cudafix manages (cudafix.activation.shells.MANAGED),
never stop or stall the shell, and never run a value.  Issue 18 item 6 named the cases that broke
it: PATH / LD_PRELOAD set from a backup, `bash -eu` aborted on the read-only UID, a root zsh's
EUID dropped, tcsh stopped by a glob in _CUDAFIX_VARS, a quadratic walk over 60,000 names.

Every case runs in every shell mode below: bash, bash under `set -eu`, zsh (as conda sources
.sh scripts: zsh mode), dash, busybox ash, fish, tcsh.  CASE_COUNT is quoted in
docs/security.md.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import time
from typing import Dict, List, Optional, Tuple

import pytest

from cudafix.activation import runtime as activation
from cudafix.activation import shells
from tests import conda_replay as cr

REPO = cr.REPO
HOSTILE = "'\";&&$(touch pwned) `touch pwned2` \n\u00fc \\ $HOME * ? [a] !0 !!"

# mode -> (argv, family, preamble)
MODES: Dict[str, Tuple[List[str], str, str]] = {
    "bash": (["bash", "--norc", "--noprofile"], "sh", ""),
    "bash-eu": (["bash", "--norc", "--noprofile"], "sh", "set -eu\n"),
    "zsh": (["zsh", "-f"], "sh", ""),
    "dash": (["dash"], "sh", ""),
    "ash": (["busybox", "sh"], "sh", ""),
    "fish": (["fish", "--no-config"], "fish", ""),
    "tcsh": (["tcsh", "-f"], "csh", ""),
}


def _available(mode: str) -> bool:
    import shutil

    found = shutil.which(MODES[mode][0][0]) is not None
    if not found and os.environ.get("CI") == "true":
        pytest.fail("%s missing (CI)" % MODES[mode][0][0])
    return found


def _q(fam: str, s: str) -> str:
    return cr.QUOTE[fam](s)


def run_restore(mode: str, env: Dict[str, str], tmp: pathlib.Path, script: Optional[pathlib.Path] = None,
                after: str = "", timeout: float = 60) -> Tuple[subprocess.CompletedProcess, Dict[bytes, bytes], Dict[bytes, bytes]]:
    """Source the shipped deactivate.d script in ``mode`` with ``env``; the env before and after."""
    argv, fam, pre = MODES[mode]
    script = script or REPO / "deactivate.d" / ("cudafix." + fam)
    cwd = tmp / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    before_f, after_f = tmp / "before", tmp / "after"
    src = {"sh": ". %s\n", "fish": "source %s\n", "csh": "source %s\n"}[fam] % _q(fam, str(script))
    code = pre + "env -0 > %s\n" % _q(fam, str(before_f)) + src + after + "env -0 > %s\necho reached-end\n" % _q(fam, str(after_f))
    f = tmp / ("s." + fam)
    f.write_bytes(code.encode("utf-8"))
    benv = {k.encode("utf-8", "surrogateescape"): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    p = subprocess.run(argv + [str(f)], env=benv, cwd=str(cwd), capture_output=True, timeout=timeout)
    got_before = cr.read_env(before_f) if before_f.exists() else {}
    got_after = cr.read_env(after_f) if after_f.exists() else {}
    return p, got_before, got_after


def _state(env: Dict[bytes, bytes], name: str) -> str:
    v = env.get(name.encode())
    return "u" if v is None else "s:" + v.decode("utf-8", "surrogateescape")


def expected_after(before: Dict[bytes, bytes]) -> Dict[bytes, bytes]:
    """The protocol (docs/activation.md), written out independently of the restore code: for each
    managed NAME listed in _CUDAFIX_VARS (split on single spaces), NAME goes back to its backup
    when the backup is non-empty and NAME still holds what cudafix set; the listed managed names'
    backups and _CUDAFIX_VARS go away.  Nothing else changes."""
    out = dict(before)
    raw = before.get(b"_CUDAFIX_VARS")
    if raw is None:
        return out
    listed = raw.decode("utf-8", "surrogateescape").split(" ")
    for name in shells.MANAGED:
        if name not in listed:
            continue
        old = before.get(("_CUDAFIX_OLD_" + name).encode(), b"").decode("utf-8", "surrogateescape")
        new = before.get(("_CUDAFIX_NEW_" + name).encode(), b"").decode("utf-8", "surrogateescape")
        if old and _state(before, name) == new:
            if old.startswith("s:"):
                out[name.encode()] = old[2:].encode("utf-8", "surrogateescape")
            else:
                out.pop(name.encode(), None)
        out.pop(("_CUDAFIX_OLD_" + name).encode(), None)
        out.pop(("_CUDAFIX_NEW_" + name).encode(), None)
    out.pop(b"_CUDAFIX_VARS", None)
    return out


def _backups(names: List[str], env: Dict[str, str], old: str = "s:/evil") -> Dict[str, str]:
    """Backups that make each listed name look activated: NEW = the name's current state."""
    out: Dict[str, str] = {}
    for n in names:
        cur = env.get(n)
        out["_CUDAFIX_OLD_" + n] = old
        out["_CUDAFIX_NEW_" + n] = "u" if cur is None else "s:" + cur
    return out


BASE = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent-home", "LANG": "C.UTF-8"}


def _case(vars_value: str, extra: Optional[Dict[str, str]] = None, backup_names: Tuple[str, ...] = ()) -> Dict[str, str]:
    env = dict(BASE)
    env.update(extra or {})
    env.update(_backups(list(backup_names), env))
    env["_CUDAFIX_VARS"] = vars_value
    return env


# the legitimate state an activation leaves: CUDA_HOME changed, CUDA_CACHE_DISABLE unset, the
# allocator config emptied, LD_LIBRARY_PATH edited (hostile values)
REAL = {
    "CUDA_HOME": "/opt/cuda-new", "_CUDAFIX_OLD_CUDA_HOME": "s:" + HOSTILE, "_CUDAFIX_NEW_CUDA_HOME": "s:/opt/cuda-new",
    "_CUDAFIX_OLD_CUDA_CACHE_DISABLE": "s:1", "_CUDAFIX_NEW_CUDA_CACHE_DISABLE": "u",
    "PYTORCH_CUDA_ALLOC_CONF": "", "_CUDAFIX_OLD_PYTORCH_CUDA_ALLOC_CONF": "u", "_CUDAFIX_NEW_PYTORCH_CUDA_ALLOC_CONF": "s:",
    "LD_LIBRARY_PATH": HOSTILE, "_CUDAFIX_OLD_LD_LIBRARY_PATH": "s:/usr/local/cuda-12.1/lib64:" + HOSTILE,
    "_CUDAFIX_NEW_LD_LIBRARY_PATH": "s:" + HOSTILE,
}
REAL_NAMES = "CUDA_HOME CUDA_CACHE_DISABLE PYTORCH_CUDA_ALLOC_CONF LD_LIBRARY_PATH"

CASES: Dict[str, Dict[str, str]] = {
    # issue 18 item 6, as reported
    "path-from-backup": _case("PATH", backup_names=("PATH",)),
    "ld-preload-from-backup": _case("LD_PRELOAD", backup_names=("LD_PRELOAD",)),
    "readonly-uid": _case("UID EUID PPID", extra={"_CUDAFIX_OLD_UID": "s:12345", "_CUDAFIX_NEW_UID": "s:0",
                                                  "_CUDAFIX_OLD_EUID": "s:65534", "_CUDAFIX_NEW_EUID": "s:0",
                                                  "_CUDAFIX_OLD_PPID": "u", "_CUDAFIX_NEW_PPID": "u"}),
    "glob-question": _case("?"),
    "glob-star": _case("*"),
    "glob-bracket": _case("[a] [!x]* CUDA_HOME", extra=dict(REAL)),
    # other variables a shell or conda owns
    "shell-owned": _case("IFS PS1 PS4 HOME SHELL PWD OLDPWD ENV SHLVL OPTIND BASH_ENV ZDOTDIR fish_user_paths argv status",
                         backup_names=("IFS", "PS1", "PS4", "HOME", "SHELL", "ENV", "OPTIND", "BASH_ENV", "ZDOTDIR")),
    "conda-owned": _case("CONDA_PREFIX CONDA_SHLVL _CE_CONDA", extra={"CONDA_PREFIX": "/opt/env", "CONDA_SHLVL": "1"},
                         backup_names=("CONDA_PREFIX", "CONDA_SHLVL", "_CE_CONDA")),
    "protocol-own-names": _case("_CUDAFIX_VARS _CUDAFIX_OLD_CUDA_HOME _cudafix_n _cudafix_o _cudafix_l",
                                backup_names=("_CUDAFIX_VARS",)),
    # names that would run code if evaluated
    "code-in-names": _case("$(touch pwned) `touch pwned2` A;touch${IFS}pwned3 B|touch C&&touch -e -- !0"),
    "newline-tab-names": _case("CUDA_HOME\nPATH\tLD_PRELOAD", extra=dict(REAL), backup_names=("PATH", "LD_PRELOAD")),
    "case-and-suffix": _case("cuda_home CUDA_HOME_X XCUDA_HOME CUDA_HOME*", extra={"CUDA_HOME": "/keep"},
                             backup_names=("cuda_home", "CUDA_HOME_X", "XCUDA_HOME")),
    # protocol edge cases on managed names
    "real-activation": _case(REAL_NAMES, extra=dict(REAL)),
    "real-duplicated-spaces": _case("  CUDA_HOME  CUDA_HOME LD_LIBRARY_PATH  ", extra=dict(REAL)),
    "real-plus-hostile": _case(REAL_NAMES + " PATH LD_PRELOAD UID ? *", extra=dict(REAL), backup_names=("PATH", "LD_PRELOAD")),
    "user-changed-value": _case("CUDA_HOME", extra={"CUDA_HOME": "/mine", "_CUDAFIX_OLD_CUDA_HOME": "s:/orig",
                                                    "_CUDAFIX_NEW_CUDA_HOME": "s:/ours"}),
    "malformed-backups": _case("CUDA_HOME CUDA_CACHE_MAXSIZE PYTORCH_ALLOC_CONF",
                               extra={"CUDA_HOME": "/x", "_CUDAFIX_OLD_CUDA_HOME": "x", "_CUDAFIX_NEW_CUDA_HOME": "s:/x",
                                      "_CUDAFIX_OLD_CUDA_CACHE_MAXSIZE": "", "_CUDAFIX_NEW_CUDA_CACHE_MAXSIZE": "u",
                                      "PYTORCH_ALLOC_CONF": "s:", "_CUDAFIX_OLD_PYTORCH_ALLOC_CONF": "s",
                                      "_CUDAFIX_NEW_PYTORCH_ALLOC_CONF": "s:s:"}),
    "listed-without-backups": _case("CUDA_HOME LD_LIBRARY_PATH", extra={"CUDA_HOME": HOSTILE}),
    "backups-without-list": dict(REAL, **BASE),
    "vars-empty": _case("", extra=dict(REAL)),
    "vars-blank": _case("   ", extra=dict(REAL)),
    "vars-hostile-value": _case(HOSTILE, extra=dict(REAL)),
    "many-names": _case(" ".join(["a"] * 60000) + " CUDA_HOME", extra=dict(REAL)),
    "many-valid-names": _case(" ".join("V%d" % i for i in range(12000)) + " PATH CUDA_HOME", extra=dict(REAL),
                              backup_names=("PATH",)),
}
CASE_COUNT = len(CASES) * len(MODES)  # 24 cases x 7 shell modes = 168

# per-shell variables the shell itself may set between the two dumps
VOLATILE = {b"_", b"SHLVL", b"PWD", b"OLDPWD"}


def _strip(env: Dict[bytes, bytes]) -> Dict[bytes, bytes]:
    return {k: v for k, v in env.items() if k not in VOLATILE and not k.startswith(b"_cudafix_")}


def test_case_count_is_the_documented_one():
    assert CASE_COUNT == 168
    text = (REPO / "docs" / "security.md").read_text()
    assert "%d cases" % CASE_COUNT in text


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_parent_env(case, mode, tmp_path):
    if not _available(mode):
        pytest.skip(mode + " missing")
    env = CASES[case]
    t0 = time.monotonic()
    p, before, after = run_restore(mode, env, tmp_path)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert p.stdout == b"reached-end\n", (p.stdout, p.stderr)
    assert p.stderr == b""
    assert list((tmp_path / "cwd").iterdir()) == [], "a value was run"
    assert _strip(after) == _strip(expected_after(before))
    # the Python twin of the restore code (the activation cold path) agrees
    twin = activation.restored_env({k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in before.items()})
    assert _strip({k.encode("utf-8", "surrogateescape"): v.encode("utf-8", "surrogateescape") for k, v in twin.items()}) == _strip(after)
    assert took < 10, "restore took %.1f s" % took  # was > 30 s for 60,000 names (issue 18)


@pytest.mark.parametrize("mode", ["bash", "bash-eu", "zsh", "dash", "ash"])
def test_identity_is_kept(mode, tmp_path):
    """UID / EUID stay the shell's own (zsh assigns UID / EUID with setuid / seteuid: as root a
    restore of UID=12345 dropped root before this fix; bash -eu aborted on the read-only UID)."""
    if not _available(mode):
        pytest.skip(mode + " missing")
    env = CASES["readonly-uid"]
    p, _b, _a = run_restore(mode, env, tmp_path, after='echo "uid=$(id -ru) euid=$(id -u)"\n')
    assert p.returncode == 0, p.stderr
    uid = os.getuid()
    assert p.stdout == ("uid=%d euid=%d\nreached-end\n" % (uid, os.geteuid())).encode(), (p.stdout, p.stderr)


def test_managed_list_is_compiled_into_every_script():
    for fam in shells.FAMILIES:
        for d in ("activate.d", "deactivate.d"):
            text = (REPO / d / ("cudafix." + fam)).read_text()
            loop = {"sh": "for _cudafix_n in %s; do", "fish": "for _cudafix_n in %s\n", "csh": "foreach _cudafix_n ( %s )"}[fam]
            assert loop % shells.managed_words() in text, (d, fam)  # the only loop over names
            assert text.count("_cudafix_n in ") + text.count("foreach _cudafix_n") == 1


# -- the same through a whole `conda activate` / `conda deactivate` (the cold path included) ------

@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    from cudafix.model.findings import Finding
    from cudafix.model.fixes import EnvOp, EnvPatch, Fix

    p = cr.make_prefix(tmp_path_factory.mktemp("hostile") / "env")
    cr.set_findings(p, [
        Finding(rule="cuda-home-mismatch", severity="warning", message="m",
                fix=Fix(summary="set CUDA_HOME", auto=True, applies_in="activation", env=EnvPatch((EnvOp("set", "CUDA_HOME", "/opt/cuda"),)))),
        Finding(rule="jit-cache-disabled", severity="warning", message="m",
                fix=Fix(summary="unset CUDA_CACHE_DISABLE", auto=True, applies_in="both", env=EnvPatch((EnvOp("unset", "CUDA_CACHE_DISABLE"),)))),
    ])
    return p


@pytest.mark.parametrize("shell", [s for s in cr.SHELLS if cr.available(s)])
def test_conda_round_trip_with_hostile_parent_env(shell, prefix, tmp_path):
    """A parent environment claims an earlier activation of PATH, LD_PRELOAD, UID, EUID, IFS and
    globs, next to a real one: conda activate + deactivate (sh shells under set -eu) keep running,
    set none of the claimed variables, and restore the real ones exactly."""
    home = tmp_path / "home"
    home.mkdir()
    env = cr.base_env(home)
    env.update(REAL)
    path_during = str(prefix / "bin") + ":" + env["PATH"]
    env.update({
        "_CUDAFIX_OLD_PATH": "s:/evil", "_CUDAFIX_NEW_PATH": "s:" + path_during,
        "_CUDAFIX_OLD_LD_PRELOAD": "s:/evil/libx.so", "_CUDAFIX_NEW_LD_PRELOAD": "u",
        "_CUDAFIX_OLD_UID": "s:12345", "_CUDAFIX_NEW_UID": "s:%d" % os.getuid(),
        "_CUDAFIX_OLD_EUID": "s:12345", "_CUDAFIX_NEW_EUID": "s:%d" % os.geteuid(),
        "_CUDAFIX_OLD_IFS": "s:x", "_CUDAFIX_NEW_IFS": "u",
        "_CUDAFIX_VARS": REAL_NAMES + " PATH LD_PRELOAD UID EUID IFS ? * [a] $(touch pwned)",
    })
    r = cr.Replay(shell, prefix, tmp_path / "w", env, set_u=True)
    if r.fam == "sh":
        r.raw("set -e\n")
    r.snap("before").activate().snap("during").deactivate().snap("after").raw("id -ru > ids\nid -u >> ids\n")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    assert p.stdout == b""
    assert sorted(os.listdir(str(r.cwd))) == ["ids"], "a name or value was run"
    assert (r.cwd / "ids").read_text().split() == [str(os.getuid()), str(os.geteuid())]
    before, during, after = envs["before"], envs["during"], envs["after"]
    assert during[b"PATH"] == path_during.encode() and b"LD_PRELOAD" not in during
    assert during[b"CUDA_HOME"] == b"/opt/cuda" and b"CUDA_CACHE_DISABLE" not in during
    assert _strip(after) == _strip(expected_after(before))
    assert after[b"CUDA_HOME"] == HOSTILE.encode()  # the real backup, restored
    assert p.stderr.decode().splitlines() == ["cudafix: set CUDA_HOME to /opt/cuda (cuda-home-mismatch: m); unset CUDA_CACHE_DISABLE (jit-cache-disabled: m) \u2014 cudafix status"]


# -- random parent environments (hypothesis) ---------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_WORDS = st.sampled_from(list(shells.MANAGED) + ["PATH", "LD_PRELOAD", "UID", "EUID", "IFS", "HOME", "?", "*", "[a]",
                                                 "$(touch pwned)", "", "CUDA_HOME\n", "\tCUDA_HOME", "cuda_home"])
_STATE = st.one_of(st.none(), st.sampled_from(["", "/x", HOSTILE, "s:", "u"]))
_BACKUP = st.one_of(st.none(), st.sampled_from(["", "u", "s:", "s:/x", "s:" + HOSTILE, "x", "s"]))


@st.composite
def parent_envs(draw):
    env = dict(BASE)
    env["_CUDAFIX_VARS"] = " ".join(draw(st.lists(_WORDS, max_size=12)))
    for name in list(shells.MANAGED) + ["PATH", "LD_PRELOAD", "IFS"]:
        cur = draw(_STATE) if name in shells.MANAGED else None
        if cur is not None:
            env[name] = cur
        for kind in ("OLD", "NEW"):
            b = draw(_BACKUP)
            if draw(st.booleans()) and kind == "NEW":  # often: NEW matches the current state
                b = "u" if name not in env else "s:" + env[name]
            if b is not None:
                env["_CUDAFIX_%s_%s" % (kind, name)] = b
    return env


@pytest.mark.parametrize("mode", ["bash-eu", "dash", "zsh", "fish", "tcsh"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=parent_envs())
def test_random_parent_envs(mode, env, tmp_path_factory):
    if not _available(mode):
        pytest.skip(mode + " missing")
    tmp = tmp_path_factory.mktemp("r")
    p, before, after = run_restore(mode, env, tmp)
    assert p.returncode == 0 and p.stdout == b"reached-end\n" and p.stderr == b"", (p.stdout, p.stderr)
    assert list((tmp / "cwd").iterdir()) == []
    assert _strip(after) == _strip(expected_after(before))


def test_security_doc_names_only_tests_that_exist():
    """Every test docs/security.md cites as evidence exists (file::name or ::name after
    a named file in the same cell)."""
    import re

    text = (REPO / "docs" / "security.md").read_text()
    cited = 0
    for cell in re.split(r"\n\n| \| ", text):  # paragraphs, table cells (a test id may hold "[a|b]")
        current = None
        for m in re.finditer(r"`(tests/[\w/]+\.py)?(?:::(\w+)(?:\[[^\]`]*\])?)?`", cell):
            path, name = m.group(1), m.group(2)
            if path:
                current = path
                assert (REPO / path).exists(), path
            if name:
                assert current, "%s cited without its file" % name
                assert re.search(r"^def %s\(" % name, (REPO / current).read_text(), re.M), (current, name)
                cited += 1
    bare = set(re.findall(r"`(test_\w+)`", text))
    alltests = "".join(p.read_text() for p in (REPO / "tests").glob("test_*.py"))
    for name in bare:
        assert re.search(r"^def %s\(" % name, alltests, re.M), name
    assert cited >= 15
