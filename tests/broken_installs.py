"""Broken torch installs built cheaply from real ones: a view of a real venv's site-packages.

A view is a new venv whose site-packages links every top-level entry of the real venv's
site-packages (torch itself included: the same files) except what the nvidia-* wheels own; of
those, only the chosen distributions are linked, file by file from their RECORD (torch 2.14.1's
CUDA 13 wheels share ``nvidia/cu13/lib``), and a replacement wheel (an older or other-major one,
unpacked from ~/.cache/cudafix-test-wheels) can stand in for one.  Nothing of the real venv is
modified.

Links and $ORIGIN: measured here, a symlinked torch/ directory makes ld.so resolve torch's
``$ORIGIN/../../nvidia/<lib>/lib`` in the REAL venv (a view without any nvidia wheel still
imported, mapping the real venv's libcublasLt.so.13): so torch/ and the wheels' files are HARD
links (same inode, no copy; a copy where the view is on another filesystem), and only pure-Python
entries are symlinks.  Python's torch/__init__.py searches ``sys.path`` (the view's site-packages).

``real_import(view)`` runs the view's own interpreter on ``import torch`` and returns the last
line of the traceback: the independent truth the tests compare cudafix's prediction with.
"""

from __future__ import annotations

import csv
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

VENVS = pathlib.Path(os.environ.get("CUDAFIX_TEST_VENVS", str(pathlib.Path.home() / ".cache" / "cudafix-venvs")))
WHEELS = pathlib.Path(os.environ.get("CUDAFIX_TEST_WHEELS", str(pathlib.Path.home() / ".cache" / "cudafix-test-wheels")))


def site_of(venv: pathlib.Path) -> pathlib.Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise RuntimeError("no site-packages under %s" % venv)
    return found[0]


def _dist_name(dist_info: str) -> str:
    if not dist_info.endswith(".dist-info"):
        return ""
    return dist_info[: -len(".dist-info")].rsplit("-", 1)[0].lower().replace("_", "-")


def _record(dist_info: pathlib.Path) -> List[str]:
    try:
        with open(str(dist_info / "RECORD"), newline="") as fh:
            return [row[0] for row in csv.reader(fh) if row]
    except OSError:
        return []


def nvidia_dists(site: pathlib.Path) -> Dict[str, pathlib.Path]:
    """name -> dist-info of every distribution that owns files under nvidia/."""
    out = {}
    for d in sorted(site.glob("*.dist-info")):
        if any(p.startswith("nvidia/") for p in _record(d)):
            out[_dist_name(d.name)] = d
    return out


def _link_files(src_root: pathlib.Path, dist_info: pathlib.Path, dst_site: pathlib.Path) -> None:
    for rel in _record(dist_info):
        if not rel.startswith("nvidia/"):
            continue
        src = src_root / rel
        dst = dst_site / rel
        if not src.exists() or dst.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        _hardlink(src, dst)
    # a copy: a pip run in the view (the plan's command) must change the view only
    shutil.copytree(str(dist_info), str(dst_site / dist_info.name))


def _hardlink(src: pathlib.Path, dst: pathlib.Path) -> None:
    os.link(str(src), str(dst))  # views_root() keeps views on the venvs' filesystem: never a GB copy


def _hardlink_tree(src: pathlib.Path, dst: pathlib.Path) -> None:
    for d, dirs, files in os.walk(str(src)):
        rel = os.path.relpath(d, str(src))
        out = dst / rel
        out.mkdir(parents=True, exist_ok=True)
        for f in files:
            s = pathlib.Path(d) / f
            if s.is_symlink():
                os.symlink(os.readlink(str(s)), str(out / f))
            else:
                _hardlink(s, out / f)


# Top-level entries holding ELF objects whose $ORIGIN matters (hard-linked, never symlinked).
NATIVE = ("torch", "nvfuser", "functorch", "triton", "caffe2")


def unpacked_wheel(dist: str, version: str) -> pathlib.Path:
    """A wheel from the test-wheel cache, unpacked once (as tests/shadowing.py does)."""
    dest = WHEELS / "x" / ("%s-%s" % (dist, version))
    if (dest / ".complete").exists():
        return dest
    found = sorted((WHEELS / "wheels").glob("%s-%s-*.whl" % (dist.replace("-", "_"), version)))
    if not found:
        raise RuntimeError("%s==%s not in %s: run tests/make_venvs.sh" % (dist, version, WHEELS / "wheels"))
    with zipfile.ZipFile(str(found[0])) as zf:
        zf.extractall(str(dest))
    (dest / ".complete").write_text("ok")
    return dest


def _replacement(new: str, ver: str) -> Tuple[pathlib.Path, pathlib.Path]:
    """(root, dist-info) of a stand-in: a test wheel (name, version) or, where ``new`` is a
    site-packages directory, its distribution whose dist-info is named ``ver``."""
    if os.path.isdir(new):
        return pathlib.Path(new), pathlib.Path(new) / ver
    root = unpacked_wheel(new, ver)
    return root, next(root.glob("*.dist-info"))


def views_root(tmp: pathlib.Path) -> pathlib.Path:
    """Where views can hard-link the venvs' files: ``tmp`` when on their filesystem, else a
    folder beside the venvs (``cudafix-test-views``, never inside a venv)."""
    if tmp.exists() and VENVS.exists() and os.stat(str(tmp)).st_dev == os.stat(str(VENVS)).st_dev:
        return tmp
    out = VENVS.parent / "cudafix-test-views"
    out.mkdir(parents=True, exist_ok=True)
    return out


def make_view(src_venv: pathlib.Path, dest: pathlib.Path, drop: Iterable[str] = (),
              replace: Sequence[Tuple[str, str, str]] = (), python: Optional[str] = None,
              with_pip: bool = False) -> pathlib.Path:
    """A venv at ``dest`` seeing ``src_venv``'s packages, without the nvidia-* distributions in
    ``drop`` ("*": all of them), with ``replace`` (old name, new name, version: the unpacked test
    wheel) in place of one.  Returns dest's interpreter."""
    src_site = site_of(src_venv)
    if dest.exists():
        shutil.rmtree(str(dest))
    base = python or str((src_venv / "bin" / "python").resolve())
    subprocess.run([base, "-m", "venv"] + ([] if with_pip else ["--without-pip"]) + [str(dest)], check=True)
    site = site_of(dest)
    owned = nvidia_dists(src_site)
    drop = set(owned) if "*" in drop else {d.lower() for d in drop}
    replaced = {old.lower(): (new, ver) for old, new, ver in replace}
    owned_infos = {d.name for d in owned.values()}
    for entry in sorted(os.listdir(str(src_site))):
        if entry == "nvidia" or entry in owned_infos or (site / entry).exists() or os.path.lexists(str(site / entry)):
            continue
        if entry in NATIVE and (src_site / entry).is_dir():
            _hardlink_tree(src_site / entry, site / entry)
        else:
            os.symlink(str(src_site / entry), str(site / entry))
    for name, info in owned.items():
        if name in replaced:
            _link_files(*_replacement(*replaced[name]), site)
        elif name not in drop:
            _link_files(src_site, info, site)
    for old, (new, ver) in replaced.items():
        if old not in owned:  # a wheel the real venv lacks, added
            _link_files(*_replacement(new, ver), site)
    return dest / "bin" / "python"


def real_import(python: pathlib.Path, timeout: float = 300) -> Tuple[int, str]:
    """(exit status, last line of the traceback: "" when `import torch` worked)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON", "CUDAFIX"))}
    p = subprocess.run([str(python), "-c", "import torch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env, cwd="/")
    lines = [ln for ln in p.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return p.returncode, (lines[-1] if p.returncode and lines else "")


if __name__ == "__main__":  # python tests/broken_installs.py SRC_VENV DEST [drop...]
    py = make_view(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:])
    print(real_import(py))
