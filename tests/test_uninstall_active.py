"""Uninstall while the env is active (issue 16, item 5), in real bash: activate, remove cudafix,
deactivate, and the shell must be as it was before activation (CUDA_HOME back, no _CUDAFIX_*).

The env is a venv with cudafix pip-installed from this checkout, used as a conda env: `conda
activate` / `conda deactivate` source etc/conda/{activate,deactivate}.d/*.sh in sorted order
(conda/activate.py), which is what the script below does.  The activation is cudafix's own,
planned for the yolov9 env whose CUDA_HOME it corrects (tests/fixtures/yolov9/
yolov9-h200-conda-cudahome.json: CUDA_HOME -> /usr/local/cuda-11.3, CUDA_CACHE_MAXSIZE -> 4 GiB), so the
test does not depend on this machine's toolkits.

- pip: `eval "$(cudafix hooks uninstall --shell bash)"` then `pip uninstall` (the documented
  way; plain `pip uninstall` cannot run code, and the test shows what it leaves);
- conda remove, as conda/core/link.py does it: run bin/.cudafix-pre-unlink.sh with bash and
  PREFIX set (run_script), then unlink the package's files; a second shell that activated the
  env before the removal is restored by its own `conda deactivate`.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tests.conftest import REPO
from tests.test_packaging_wheel import copy_checkout

FIXTURE = REPO / "tests" / "fixtures" / "yolov9" / "yolov9-h200-conda-cudahome.json"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = copy_checkout(tmp / "src")
    e = dict(os.environ, HOME=str(tmp), PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(src)],
                          env=e, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (whl,) = (tmp / "dist").glob("cudafix-*.whl")
    return whl


@pytest.fixture()
def env(tmp_path, wheel) -> dict:
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True, timeout=300)
    py = prefix / "bin" / "python"
    site = pathlib.Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    # cudafix's dependencies from the test interpreter (no download); cudafix itself installed
    (site / "zz-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    home = tmp_path / "home"
    home.mkdir()
    envvars = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAFIX", "_CUDAFIX", "CONDA", "PYTHON", "CUDA_"))}
    envvars.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], env=envvars,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (prefix / "etc" / "conda" / "deactivate.d" / "cudafix.sh").is_file()
    # as the conda package's build script installs it (tests/test_packaging_conda.py checks the
    # package carries exactly this file)
    shutil.copy(str(REPO / "recipe" / "pre-unlink.sh"), str(prefix / "bin" / ".cudafix-pre-unlink.sh"))
    return {"prefix": prefix, "py": py, "env": envvars}


PRELUDE = r'''
set -u
P=$1 F=$2
export CONDA_PREFIX=$P CUDA_HOME=/opt/cuda-before CUDAFIX_QUIET=1
unset CUDA_CACHE_MAXSIZE
conda_activate() {   # what `conda activate` does for cudafix: its activate.d, here planned for the fixture
  eval "$("$P/bin/python" -m cudafix shell --shell bash --activate --from "$F" 2>/dev/null)"
}
conda_deactivate() { # conda sources deactivate.d/*.sh, sorted
  for f in "$P"/etc/conda/deactivate.d/*.sh; do [ -f "$f" ] && . "$f"; done
}
show() { printf 'CUDA_HOME=%s CACHE=%s CUDAFIX=%s\n' "${CUDA_HOME-unset}" "${CUDA_CACHE_MAXSIZE-unset}" "$(env | grep -c '^_CUDAFIX_')"; }
'''

BEFORE = "CUDA_HOME=/opt/cuda-before CACHE=unset CUDAFIX=0"
ACTIVE = "CUDA_HOME=/usr/local/cuda-11.3 CACHE=4294967296 CUDAFIX=5"


def bash(script: str, env: dict) -> list:
    proc = subprocess.run(["bash", "-c", PRELUDE + script, "bash", str(env["prefix"]), str(FIXTURE)],
                          env=env["env"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines() + ["stderr:" + proc.stderr]


def test_pip_uninstall_alone_leaks_which_is_why_the_docs_say_hooks_uninstall_first(env):
    out = bash('''
conda_activate; show
"$P/bin/python" -m pip uninstall -q -y cudafix
conda_deactivate; show
''', env)
    assert out[:2] == [ACTIVE, ACTIVE]


def test_pip_route_hooks_uninstall_restores_the_shell(env):
    out = bash('''
show; conda_activate; show
eval "$("$P/bin/python" -m cudafix hooks uninstall --shell bash 2>/dev/null)"; show
"$P/bin/python" -m pip uninstall -q -y cudafix 2>&1
conda_deactivate; show
[ -e "$P/etc/conda/deactivate.d/cudafix.sh" ] && echo left || echo gone
''', env)
    assert out[:4] == [BEFORE, ACTIVE, BEFORE, BEFORE], out
    assert out[4:] == ["gone", "stderr:"], out


def conda_remove(prefix: pathlib.Path, env: dict) -> None:
    """conda/core/link.py: run_script(prefix, prec, "pre-unlink") = bash -x bin/.NAME-pre-unlink.sh
    with PREFIX, PKG_NAME ... set; then the package's files are unlinked."""
    script = prefix / "bin" / ".cudafix-pre-unlink.sh"
    e = dict(env, PREFIX=str(prefix), PKG_NAME="cudafix", PKG_VERSION="0.1.0", PKG_BUILDNUM="0",
             ROOT_PREFIX=str(prefix), PATH="%s:%s" % (prefix / "bin", env.get("PATH", "")))
    proc = subprocess.run(["bash", "-x", str(script)], env=e, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # the package's files: what pip installed (the same payload the .conda carries) and the script
    proc = subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "cudafix"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    script.unlink()


def test_conda_remove_while_active_restores_on_deactivate_in_every_shell(env):
    prefix = env["prefix"]
    # a second shell activated the env too; it waits (a fifo) while the first one removes cudafix
    fifo = prefix.parent / "fifo"
    os.mkfifo(str(fifo))
    second = subprocess.Popen(["bash", "-c", PRELUDE + '''
conda_activate; show
read -r _ < "$3"
conda_deactivate; show
''', "bash", str(prefix), str(FIXTURE), str(fifo)], env=env["env"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
    try:
        out = bash('''
show; conda_activate; show
# conda remove cudafix (conda/core/link.py): the pre-unlink script, then the files go
PREFIX=$P PKG_NAME=cudafix bash -x "$P/bin/.cudafix-pre-unlink.sh" 2>/dev/null
"$P/bin/python" -m pip uninstall -q -y cudafix 2>&1
rm "$P/bin/.cudafix-pre-unlink.sh"
[ -e "$P/etc/conda/deactivate.d/cudafix.sh" ] && echo left || echo gone
conda_deactivate; show
''', env)
        assert out == [BEFORE, ACTIVE, "gone", BEFORE, "stderr:"], out
        unlinked = prefix / "etc" / "conda" / "deactivate.d" / "cudafix-unlinked.sh"
        assert unlinked.read_text() == (REPO / "deactivate.d" / "cudafix.sh").read_text()
    finally:
        with open(str(fifo), "w") as fh:
            fh.write("go\n")
        stdout, stderr = second.communicate(timeout=300)
    assert second.returncode == 0, stderr
    assert stdout.splitlines() == [ACTIVE, BEFORE]


def test_hooks_install_and_uninstall_remove_what_pre_unlink_left(env, tmp_path):
    prefix = env["prefix"]
    conda_remove(prefix, env["env"])
    left = sorted(p.name for p in (prefix / "etc" / "conda" / "deactivate.d").iterdir())
    assert left == ["cudafix-unlinked.csh", "cudafix-unlinked.fish", "cudafix-unlinked.sh"]
    e = dict(env["env"], PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "cudafix", "hooks", "install", "--prefix", str(prefix)],
                          env=e, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("removed ") == 3
    assert sorted(p.name for p in (prefix / "etc" / "conda" / "deactivate.d").iterdir()) == [
        "cudafix.csh", "cudafix.fish", "cudafix.sh"]
