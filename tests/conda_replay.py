"""Replay `conda activate` / `conda deactivate` in real shells, the way conda's shell code does.

conda (conda/activate.py, ``_yield_commands``) emits, in this order:

  export PATH=<new PATH>          (activate: env bin prepended; deactivate: env bin stripped)
  . <each deactivate.d script>    (deactivate: sorted, then reversed)
  unset <vars>                    (deactivate: CONDA_PREFIX, CONDA_SHLVL, ..., configured vars)
  export <vars>                   (activate: CONDA_PREFIX, CONDA_SHLVL, ..., configured vars)
  . <each activate.d script>      (activate: sorted)

A *fake conda prefix* is a ``--system-site-packages`` venv (so ``$PREFIX/bin/python`` is that
env's own interpreter with sys.prefix == $PREFIX) with a ``conda-meta/`` directory, this
checkout on a ``.pth``, and cudafix's scripts in ``etc/conda/{activate,deactivate}.d``.  Tests
choose the findings its cold path sees by writing ``$PREFIX/cudafix-test-findings.json`` (read
by a test-only module, ``_cudafix_test_inject``, which replaces ``cudafix.activation.runtime.collect``);
every cold-path run appends a line to ``$PREFIX/cold-calls.log``.

Environments are compared as the bytes ``env -0`` prints.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cudafix.activation.shells import csh, fish, sh  # noqa: E402

# shell name -> (argv prefix, family)
SHELLS = {
    "bash": (["bash", "--norc", "--noprofile"], "sh"),
    "zsh": (["zsh", "-f"], "sh"),
    "dash": (["dash"], "sh"),
    "ash": (["busybox", "sh"], "sh"),
    "fish": (["fish", "--no-config"], "fish"),
    "tcsh": (["tcsh", "-f"], "csh"),
}
QUOTE = {"sh": sh.quote, "fish": fish.quote, "csh": csh.quote}
SOURCE = {"sh": ". %s", "fish": "source %s", "csh": "source %s"}

INJECT = r'''
import json, os, sys
_F = os.path.join(sys.prefix, "cudafix-test-findings.json")
if os.path.exists(_F):
    import cudafix.activation.runtime as _a
    from cudafix.model.findings import Finding as _Finding

    def _collect(env):
        with open(os.path.join(sys.prefix, "cold-calls.log"), "a") as fh:
            fh.write("cold\n")
        with open(_F) as fh:
            data = json.load(fh)
        if data == "crash":
            raise RuntimeError("injected failure")
        return None, [_Finding.from_dict(d) for d in data]

    _a.collect = _collect
'''


def available(shell: str) -> bool:
    return shutil.which(SHELLS[shell][0][0]) is not None


def make_prefix(path: pathlib.Path, other_scripts: bool = True) -> pathlib.Path:
    """A fake conda env at ``path`` (may contain spaces and quotes)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(path)],
        check=True, capture_output=True, timeout=120,
    )
    (path / "conda-meta").mkdir()
    (path / "conda-meta" / "history").write_text("")
    site = pathlib.Path(
        subprocess.run(
            [str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()
    )
    (site / "cudafix-checkout.pth").write_text(str(REPO) + "\n")
    (site / "_cudafix_test_inject.py").write_text(INJECT)
    (site / "_cudafix_test_inject.pth").write_text("import _cudafix_test_inject\n")
    # compile now, as an installed env would be: a __pycache__ created by the first cold run
    # would make site-packages newer than the cache that run writes
    subprocess.run([str(path / "bin" / "python"), "-m", "compileall", "-q", str(site / "_cudafix_test_inject.py")],
                   check=True, capture_output=True, timeout=60)
    for d in ("activate.d", "deactivate.d"):
        dst = path / "etc" / "conda" / d
        dst.mkdir(parents=True)
        for ext in ("sh", "fish", "csh"):
            shutil.copy(REPO / d / ("cudafix." + ext), dst / ("cudafix." + ext))
            if other_scripts:
                # another package's script, sorted around ours: it must still run, in order
                (dst / ("aaa-other." + ext)).write_text(_other_script(ext, d))
    return path


def _other_script(ext: str, d: str) -> str:
    name = "OTHER_PKG_ACTIVE"
    if d == "activate.d":
        return {"sh": "export %s=1\n", "fish": "set -gx %s 1\n", "csh": "setenv %s 1\n"}[ext] % name
    return {"sh": "unset %s\n", "fish": "set -e %s\n", "csh": "unsetenv %s\n"}[ext] % name


def set_findings(prefix: pathlib.Path, findings) -> None:
    data = findings if isinstance(findings, str) else [f.to_dict() for f in findings]
    (prefix / "cudafix-test-findings.json").write_text(json.dumps(data))


def cold_calls(prefix: pathlib.Path) -> int:
    try:
        return len((prefix / "cold-calls.log").read_text().splitlines())
    except FileNotFoundError:
        return 0


def _scripts(prefix: pathlib.Path, d: str, ext: str) -> List[pathlib.Path]:
    return sorted((prefix / "etc" / "conda" / d).glob("*." + ext))


def _export(fam: str, name: str, value: str) -> str:
    q = QUOTE[fam](value)
    return {"sh": "export %s=%s", "fish": "set -gx %s %s", "csh": "setenv %s %s"}[fam] % (name, q)


def _unset(fam: str, name: str) -> str:
    return {"sh": "unset %s", "fish": "set -e %s", "csh": "unsetenv %s"}[fam] % name


CONDA_VARS = ("CONDA_PREFIX", "CONDA_SHLVL", "CONDA_DEFAULT_ENV", "CONDA_PROMPT_MODIFIER")
CONFIGURED = {"MY_CONFIGURED_VAR": "from conda env config vars"}


def activate_code(fam: str, prefix: pathlib.Path, path_before: str) -> str:
    ext = fam
    lines = [_export(fam, "PATH", str(prefix / "bin") + ":" + path_before)]
    lines += [
        _export(fam, "CONDA_PREFIX", str(prefix)),
        _export(fam, "CONDA_SHLVL", "1"),
        _export(fam, "CONDA_DEFAULT_ENV", prefix.name),
        _export(fam, "CONDA_PROMPT_MODIFIER", "(%s) " % prefix.name),
    ]
    lines += [_export(fam, k, v) for k, v in CONFIGURED.items()]
    lines += [SOURCE[fam] % QUOTE[fam](str(s)) for s in _scripts(prefix, "activate.d", ext)]
    return "\n".join(lines) + "\n"


def deactivate_code(fam: str, prefix: pathlib.Path, path_before: str) -> str:
    lines = [_export(fam, "PATH", path_before)]
    lines += [SOURCE[fam] % QUOTE[fam](str(s)) for s in reversed(_scripts(prefix, "deactivate.d", fam))]
    lines += [_unset(fam, v) for v in CONDA_VARS + tuple(CONFIGURED)]
    return "\n".join(lines) + "\n"


def rattler_activate_code(shell_name: str, prefix: pathlib.Path, path_before: str) -> str:
    """Activation code rendered by py-rattler (an independent implementation of conda's)."""
    from rattler.shell import ActivationVariables, Shell, activate

    shell = {"bash": Shell.bash, "zsh": Shell.zsh, "fish": Shell.fish}[shell_name]
    res = activate(prefix, ActivationVariables(None, path_before.split(":")), shell)
    return res.script + "\n"


def dump(fam: str, out: pathlib.Path) -> str:
    q = QUOTE[fam](str(out))
    return "env -0 > %s\n" % q


def run_shell(shell: str, script: str, env: Dict[str, str], cwd: pathlib.Path, timeout: float = 120) -> subprocess.CompletedProcess:
    argv, fam = SHELLS[shell]
    f = cwd.parent / ("replay-%s.%s" % (shell, fam))
    f.write_bytes(script.encode("utf-8", "surrogateescape"))
    benv = {k.encode("utf-8", "surrogateescape"): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    return subprocess.run(argv + [str(f)], env=benv, cwd=str(cwd), capture_output=True, timeout=timeout)


def read_env(path: pathlib.Path) -> Dict[bytes, bytes]:
    out: Dict[bytes, bytes] = {}
    for item in path.read_bytes().split(b"\0"):
        if item:
            k, _, v = item.partition(b"=")
            out[k] = v
    return out


class Replay:
    """Build and run one replay: a list of steps, each followed by an env dump."""

    def __init__(self, shell: str, prefix: pathlib.Path, workdir: pathlib.Path, env: Dict[str, str], set_u: bool = False):
        self.shell = shell
        self.fam = SHELLS[shell][1]
        self.prefix = prefix
        self.workdir = workdir
        self.dumps = workdir / "dumps"
        self.cwd = workdir / "cwd"
        self.dumps.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.env = dict(env)
        self.path_before = env["PATH"]
        self.parts: List[str] = []
        if set_u:
            self.parts.append({"sh": "set -u\n", "fish": "", "csh": ""}[self.fam])
        self.names: List[str] = []

    def snap(self, name: str) -> "Replay":
        self.names.append(name)
        self.parts.append(dump(self.fam, self.dumps / name))
        return self

    def activate(self, rattler: bool = False) -> "Replay":
        if rattler:
            self.parts.append(rattler_activate_code(self.shell, self.prefix, self.path_before))
        else:
            self.parts.append(activate_code(self.fam, self.prefix, self.path_before))
        return self

    def deactivate(self) -> "Replay":
        self.parts.append(deactivate_code(self.fam, self.prefix, self.path_before))
        return self

    def raw(self, code: str) -> "Replay":
        self.parts.append(code)
        return self

    def run(self):
        p = run_shell(self.shell, "".join(self.parts), self.env, self.cwd)
        envs = {}
        for n in self.names:
            f = self.dumps / n
            envs[n] = read_env(f) if f.exists() else None
        return p, envs


def base_env(home: pathlib.Path, extra: Optional[Dict[str, str]] = None, drop: Sequence[str] = ()) -> Dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }
    env.update(extra or {})
    for k in drop:
        env.pop(k, None)
    return env
