"""Toolkit rules: the CUDA toolkit extension builds would use vs torch's CUDA
(https://github.com/pytorch/pytorch/blob/main/torch/utils/cpp_extension.py `_check_cuda_version`; the reports each rule cites, docs/rules.md)."""

from __future__ import annotations

import os
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional, Tuple

from cudafix.model.findings import BUILD, ERROR, WARNING, Outcome, Rule
from cudafix.model.fixes import SET, EnvOp, EnvPatch, Fix
from cudafix.rules._util import builds_extensions, major_minor, mm_str, ok, problem, unknown
from cudafix.model.snapshot import Snapshot, Toolkit


def _same(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _toolkit_at(snap: Snapshot, path: str) -> Optional[Toolkit]:
    for tk in snap.toolkits.toolkits:
        if _same(tk.path, path):
            return tk
    real = [tk for tk in snap.toolkits.toolkits if tk.found_via and _same(tk.found_via, path)]
    if real:
        return real[0]
    # The probe records toolkits by realpath and the names they were seen under (``sources``),
    # while cuda_home is spelled as cpp_extension sees it: /usr/local/cuda -> cuda-12.1 (a
    # symlink) or CUDA_HOME=<symlink> must still find that toolkit.
    via = snap.toolkits.cuda_home_via
    seen_as = [tk for tk in snap.toolkits.toolkits
               if any(s.startswith("/") and _same(s, path) for s in tk.sources)
               or (via in ("CUDA_HOME", "CUDA_PATH") and via in tk.sources)]
    return seen_as[0] if seen_as else None


def _matching(snap: Snapshot, want) -> List[Toolkit]:
    """Installed toolkits whose major.minor is ``want``, best first (conda env, then versioned dirs)."""
    found = [tk for tk in snap.toolkits.toolkits if tk.version and major_minor(tk.version) == want and not tk.unknown]
    prefix = snap.python.conda_prefix or ""

    def rank(tk: Toolkit):
        in_env = bool(prefix) and (_same(tk.path, prefix) or tk.path.startswith(prefix.rstrip("/") + "/"))
        has_nvcc = bool(tk.nvcc)
        versioned = os.path.basename(tk.path.rstrip("/")).startswith("cuda-")
        return (not has_nvcc, not in_env, not versioned, tk.path)

    return sorted(found, key=rank)


_VARS = ("CUDA_HOME", "CUDA_PATH")
BUILD_NOTE = "matters when building CUDA extensions (torch.utils.cpp_extension, setup.py of CUDA packages), not when running torch"


def _points_nowhere(snap: Snapshot, var: str) -> Optional[str]:
    """Why ``var`` (set, non-empty) points at no usable toolkit; None when it does (or is unset)."""
    val = snap.env.get(var)
    if not val:
        return None
    why = snap.toolkits.unknown.get(var)  # the probe's stat of the directory failed
    if why:
        return why
    tk = _toolkit_at(snap, val)
    if tk is not None and not tk.nvcc:
        return "%s=%s: no bin/nvcc in %s" % (var, val, tk.path)
    return None


def _as_written(snap: Snapshot, var: str) -> Optional[Tuple[str, List[str]]]:
    """(what is wrong, candidate corrections) for a value that cannot work as written.
    torch.utils.cpp_extension uses the string as it is (``os.path.join(CUDA_HOME, 'bin', 'nvcc')``),
    so a ':' from ``export CUDA_HOME=$CUDA_HOME:/usr/local/cuda`` stays in every path it builds,
    a relative path depends on each build's working directory, a file has no bin/nvcc under it."""
    val = snap.env.get(var) or ""
    if ":" in val:
        parts = [p for p in val.split(":") if p]
        what = ("a leading ':'" if val.startswith(":") and len(parts) == 1 else "a trailing ':'" if len(parts) == 1
                else "a ':'-separated list")
        return what, parts
    if val and not val.startswith("/"):
        return "a relative path (resolved against each build's working directory)", [
            tk.path for tk in snap.toolkits.toolkits if tk.path.rstrip("/").endswith("/" + val.strip("/"))]
    if val and "not a directory" in (snap.toolkits.unknown.get(var) or ""):
        up = os.path.dirname(val.rstrip("/"))
        return "a file, not a directory", [os.path.dirname(up) if os.path.basename(up) == "bin" else up]
    return None


def _corrected(snap: Snapshot, candidates: List[str]) -> Optional[str]:
    for c in candidates:
        tk = _toolkit_at(snap, c) if c.startswith("/") else None
        if tk is not None and tk.nvcc:
            return c
    return None


def _malformed_finding(snap: Snapshot, var: str, what: str, candidates: List[str]) -> Outcome:
    val = snap.env[var]
    fixed = _corrected(snap, candidates)
    ev = ["%s=%r is %s" % (var, val, what),
          "torch.utils.cpp_extension uses the value as written: it runs %r" % os.path.join(val, "bin", "nvcc"),
          "this %s" % BUILD_NOTE]
    if fixed:
        ev.append("%s is an installed toolkit with bin/nvcc" % fixed)
        fix = Fix(summary="set %s=%s" % (var, fixed), commands=("export %s=%s" % (var, shlex.quote(fixed)),))
    else:
        fix = Fix(summary="set %s to the absolute path of a toolkit directory (the one holding bin/nvcc), or unset it" % var,
                  commands=("unset %s" % var,))
    return problem("%s=%r cannot work as written (%s): CUDA extension builds fail%s" % (
        var, val, what, "; use %s=%s" % (var, fixed) if fixed else ""), ev, fix=fix, subject=var)


def check_cuda_home_missing(snap: Snapshot) -> Iterable[Outcome]:
    out: List[Outcome] = []
    tks = snap.toolkits
    for var in _VARS:
        bad = _as_written(snap, var)
        if bad is not None:
            out.append(_malformed_finding(snap, var, *bad))
            continue
        why = _points_nowhere(snap, var)
        if why is None:
            continue
        val = snap.env[var]
        picked = tks.cuda_home_via == var
        ev = [
            why,
            "%s is set in the environment: %s" % (var, "torch.utils.cpp_extension uses it as CUDA_HOME (it reads CUDA_HOME, then CUDA_PATH) and looks for bin/nvcc there" if picked
                                                  else "CUDA_PATH is what NVIDIA's cuda-pathfinder and Windows-style build scripts read"),
            "this %s" % BUILD_NOTE,
        ]
        others = [tk for tk in tks.toolkits if tk.nvcc and tk.version and not tk.unknown]
        if others:
            # a versioned toolkit dir (/usr/local/cuda-13.0) before a wrapper's prefix (/usr/local)
            best = sorted(others, key=lambda tk: (not os.path.basename(tk.path.rstrip("/")).startswith("cuda"), tk.path))[0]
            ev.append("an installed toolkit with nvcc: %s (CUDA %s)" % (best.path, best.version))
            fix = Fix(summary="point %s at an installed toolkit, or unset it" % var,
                      commands=("export %s=%s" % (var, shlex.quote(best.path)),))  # pasted into sh: quoted
        else:
            fix = Fix(summary="unset %s, or install a CUDA toolkit (nvcc) there" % var, commands=("unset %s" % var,))
        # Advice, not automatic: the user set it on purpose and may be about to install there.
        out.append(problem("%s=%s points at no CUDA toolkit (%s): CUDA extension builds fail" % (
            var, val, "does not exist" if "nvcc" not in why else "no bin/nvcc"), ev + _build_severity_evidence(snap), fix=fix,
            severity=_build_severity(snap, ERROR), subject=var))
    home, via = tks.cuda_home, tks.cuda_home_via
    if home and via not in _VARS:
        tk = _toolkit_at(snap, home)
        if tk is not None and not tk.nvcc:
            out.append(problem(
                "%s (picked via %s) has no bin/nvcc: CUDA extension builds fail" % (home, via),
                ["torch.utils.cpp_extension falls back to %s when CUDA_HOME, CUDA_PATH and nvcc on PATH are absent" % home,
                 "%s has no bin/nvcc" % tk.path, "this %s" % BUILD_NOTE],
                fix=Fix(summary="install a CUDA toolkit with nvcc, or set CUDA_HOME to one"),
                severity=WARNING, subject="CUDA_HOME"))
    if out:
        return out
    set_vars = [v for v in _VARS if snap.env.get(v)]
    if set_vars:
        return [ok("%s point%s at a toolkit with bin/nvcc" % (" and ".join("%s=%s" % (v, snap.env[v]) for v in set_vars), "s" if len(set_vars) == 1 else ""), subject="CUDA_HOME")]
    return [ok("neither CUDA_HOME nor CUDA_PATH is set%s" % ("; extension builds use %s (via %s)" % (home, via) if home else ""), subject="CUDA_HOME")]


def check_cuda_home(snap: Snapshot) -> Iterable[Outcome]:
    t = snap.primary_torch
    if t is None or not t.cuda:
        return [ok("no CUDA torch build: no extension toolkit to match", subject="CUDA_HOME")]
    want = major_minor(t.cuda)
    if want is None:
        return [unknown("torch.version.cuda %r unreadable" % t.cuda, subject="CUDA_HOME")]
    tks = snap.toolkits
    if not tks.cuda_home:
        why = tks.unknown.get("cuda_home")
        if why:
            return [unknown("which toolkit extension builds would use is unknown", why, subject="CUDA_HOME")]
        return [ok("no CUDA toolkit found (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda): nothing to mismatch; extension builds would need one", subject="CUDA_HOME")]
    home = tks.cuda_home
    via = tks.cuda_home_via or "?"
    tk = _toolkit_at(snap, home)
    if via in _VARS and (tk is None or not tk.version) and _points_nowhere(snap, via):
        return [ok("%s points at no toolkit (reported by cuda-home-missing)" % via, subject="CUDA_HOME")]
    if tk is None or not tk.version:
        why = (tk.unknown if tk else None) or "no version.json / version.txt / nvcc version recorded for it"
        return [unknown("toolkit %s (via %s): version unknown" % (home, via), why, subject="CUDA_HOME")]
    have = major_minor(tk.version)
    if have is None:
        return [unknown("toolkit %s version %r unreadable" % (home, tk.version), subject="CUDA_HOME")]
    if have == want:
        return [ok("extension builds use CUDA %s at %s (via %s), as torch %s" % (tk.version, home, via, t.full_version), subject="CUDA_HOME")]
    major = have[0] != want[0]
    ev = [
        "torch.utils.cpp_extension picks CUDA_HOME, then CUDA_PATH, then nvcc on PATH, then /usr/local/cuda: here %s via %s" % (home, via),
        "that toolkit is CUDA %s (%s); torch %s was built with CUDA %s" % (tk.version, tk.found_via or tk.path, t.full_version, t.cuda),
        ("a different CUDA major: cpp_extension raises RuntimeError and extension builds fail" if major
         else "same major, different minor: cpp_extension only warns"),
    ]
    matches = _matching(snap, want)
    if matches:
        target = matches[0].path
        ev.append("an installed toolkit matches torch's CUDA %s: %s (%s)" % (mm_str(want), target, matches[0].version))
        # Safe: CUDA_HOME is read only by build tools (cpp_extension, setup.py of CUDA extensions);
        # pointing it at an installed toolkit of torch's exact CUDA major.minor turns a failing (or
        # warned) extension build into a matching one and changes nothing torch loads at runtime.
        fix = Fix(
            summary="point CUDA_HOME at %s (CUDA %s, as torch)" % (target, mm_str(want)),
            auto=True,
            env=EnvPatch((EnvOp(SET, "CUDA_HOME", target),)),
            applies_in="both",
        )
    else:
        ev.append("no installed toolkit has CUDA %s" % mm_str(want))
        cmds = ()
        if snap.python.conda_prefix:
            cmds = ("conda install -c nvidia cuda-nvcc=%s" % mm_str(want), 'export CUDA_HOME="$CONDA_PREFIX"')
        fix = Fix(summary="install a CUDA %s toolkit (nvcc) and point CUDA_HOME at it" % mm_str(want), commands=cmds)
    ev.append("this %s" % BUILD_NOTE)
    msg = "CUDA_HOME toolkit %s (CUDA %s) does not match torch's CUDA %s: %s" % (
        home, mm_str(have), mm_str(want), "CUDA extension builds fail" if major else "CUDA extension builds warn (same major)")
    return [problem(msg, ev + _build_severity_evidence(snap), fix=fix, severity=_build_severity(snap, ERROR if major else WARNING), subject="CUDA_HOME")]


def _build_severity(snap: Snapshot, when_building: str) -> str:
    """A build-time problem breaks only a build: an error only where the env shows it builds
    CUDA extensions (rules/_util.py builds_extensions), a warning everywhere else."""
    return when_building if builds_extensions(snap) else WARNING


def _build_severity_evidence(snap: Snapshot) -> List[str]:
    why = builds_extensions(snap)
    return [why] if why else ["no extension built in this env was found (torch extension cache, unowned torch-linked modules): a warning until one is built"]


RULES = (
    Rule(
        id="cuda-home-mismatch",
        severity=WARNING,
        title="The toolkit extension builds use (CUDA_HOME / CUDA_PATH / nvcc) differs from torch's CUDA",
        check=check_cuda_home,
        needs=("torch", "toolkits"),
        scope=BUILD,
        auto=True,
        severity_basis="error for a different CUDA major only where the env shows it builds CUDA extensions (a module in torch's extension cache, TORCH_EXTENSIONS_DIR; or a torch-linked module no installed package owns, built from source in place): there the build fails. Everywhere else a warning: running torch never uses this toolkit, only a future extension build would fail. A different minor is a warning (cpp_extension only warns).",
        cause="torch came with its own CUDA runtime (pip wheel or conda), but torch.utils.cpp_extension compiles extensions with the toolkit it finds first: CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda. When that toolkit's major differs from torch.version.cuda, builds fail; a different minor only warns.",
        symptoms=(
            "RuntimeError: The detected CUDA version (11.8) mismatches the version that was used to compile PyTorch (12.1). Please make sure to use the same CUDA versions.",
            "The detected CUDA version (12.4) has a minor version mismatch with the version that was used to compile PyTorch (12.1). Most likely this shouldn't be a problem.",
            "Cuda extensions are being compiled with a version of Cuda that does not match the version used to compile Pytorch binaries.",
        ),
        evidence_used="torch.version.cuda; the toolkit cpp_extension would pick and how (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda) with its version.json / version.txt; the other installed toolkits",
        fix_text="automatic when a toolkit of torch's exact CUDA major.minor is installed: CUDA_HOME is set to it (e.g. /usr/local/cuda-11.3 for torch 1.10.0+cu113). Otherwise install one (conda: cuda-nvcc of torch's CUDA) and point CUDA_HOME at it.",
        sources=("vllm-project/vllm#1453", "pytorch/pytorch#73047", "pytorch/pytorch#136845", "ghostpad/ghostpad#9",
                 "torch/utils/cpp_extension.py (_find_cuda_home, _check_cuda_version)"),
    ),
    Rule(
        id="cuda-home-missing",
        severity=WARNING,
        title="CUDA_HOME / CUDA_PATH points at no CUDA toolkit (missing directory, or no bin/nvcc)",
        check=check_cuda_home_missing,
        needs=("toolkits", "env"),
        scope=BUILD,
        severity_basis="error where the variable is set explicitly and the env shows it builds CUDA extensions (a module in torch's extension cache, or a torch-linked module no package owns): its builds fail. A warning otherwise (running torch never reads it), and when only the /usr/local/cuda fallback lacks nvcc.",
        cause="CUDA_HOME (or CUDA_PATH) names a directory that does not exist or holds no bin/nvcc: a toolkit that was uninstalled or upgraded (/usr/local/cuda-11.8 -> 12.4), a path copied from another machine, or a conda env that was removed; or a value that cannot work as written: a leading or trailing ':' (`export CUDA_HOME=$CUDA_HOME:/usr/local/cuda` on an empty CUDA_HOME), a ':'-separated list, a relative path, a file (…/bin/nvcc) instead of the toolkit directory — named with the corrected value. torch.utils.cpp_extension takes CUDA_HOME, then CUDA_PATH, as the toolkit without checking it, so every CUDA extension build fails. Error when the variable is set explicitly; warning when only the /usr/local/cuda fallback lacks nvcc. It matters for building CUDA extensions, not for running torch: the startup hook never warns about it.",
        symptoms=(
            "error: nvcc not found at '/usr/local/cuda-11.8/bin/nvcc'. Ensure CUDA path '/usr/local/cuda-11.8' is correct.",
            "/bin/sh: 1: :/usr/local/cuda/bin/nvcc: not found",
            "FileNotFoundError: [Errno 2] No such file or directory: ':/usr/local/cuda:/usr/local/cuda-10.1/bin/nvcc'",
        ),
        evidence_used="CUDA_HOME and CUDA_PATH from the environment; whether each directory exists and has bin/nvcc (the toolkit probe's stat of it); the other installed toolkits",
        fix_text="point the variable at an installed toolkit with nvcc (the exact export is printed), or unset it. Advice only: the variable was set on purpose.",
        sources=("torch/utils/cpp_extension.py (_find_cuda_home: CUDA_HOME, then CUDA_PATH, then nvcc on PATH, then /usr/local/cuda)",
                 "https://pytorch.org/docs/stable/cpp_extension.html",
                 "NVIDIA/apex#368 (':/usr/local/cuda:/usr/local/cuda-10.1/bin/nvcc': from export CUDA_HOME=$CUDA_HOME:/usr/local/cuda)",
                 "rusty1s/pytorch_cluster#55 ('/usr/local/cuda:/bin/nvcc')", "aim-uofa/AdelaiDet#338 (':/usr/local/cuda/bin/nvcc: not found')"),
    ),
)
