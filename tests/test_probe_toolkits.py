"""Toolkits: version files (recorded texts), a fake /usr/local with bad entries, conda-meta, wheels."""

from __future__ import annotations

import os
import pathlib
import shutil

from cudafix.probes.pyenv import packages
from cudafix.probes.pyenv import toolkits as tk
from tests.conftest import FIXTURES, require, venv_site_packages

PROBE = FIXTURES / "probe"


def test_parse_version_files():
    assert tk.parse_version_json((PROBE / "cuda-11.5_version.json").read_text()) == "11.5.2"
    assert tk.parse_version_json((PROBE / "cuda-11.8_version.json").read_text()) == "11.8.20220929"
    assert tk.parse_version_json("{not json") is None
    assert tk.parse_version_json('{"cuda": {"version": "twelve"}}') is None
    assert tk.parse_version_json("[1, 2]") is None
    assert tk.parse_version_txt("CUDA Version 10.2.89\n") == "10.2.89"
    assert tk.parse_version_txt("nothing") is None
    assert tk.parse_nvcc_version((PROBE / "nvcc_version_13.0.88.txt").read_text()) == "13.0.88"


def test_parse_real_cuda_h():
    require(os.path.exists("/usr/local/cuda-13.0/include/cuda.h"), "the CUDA 13.0 toolkit (/usr/local/cuda-13.0/include/cuda.h) is absent")
    text = pathlib.Path("/usr/local/cuda-13.0/include/cuda.h").read_text(errors="replace")
    assert tk.parse_cuda_h(text) == "13.0"
    t = tk.read_toolkit("/usr/local/cuda")
    assert t.path == "/usr/local/cuda-13.0" and t.version == "13.0" and t.nvcc.endswith("bin/nvcc")


def _fake_usr_local(tmp_path: pathlib.Path) -> pathlib.Path:
    ul = tmp_path / "usr_local"
    (ul / "cuda-11.3").mkdir(parents=True)
    (ul / "cuda-11.3" / "version.txt").write_text("CUDA Version 11.3.109\n")
    (ul / "cuda-11.5" / "bin").mkdir(parents=True)
    shutil.copy(str(PROBE / "cuda-11.5_version.json"), str(ul / "cuda-11.5" / "version.json"))
    os.symlink("cuda-11.5", str(ul / "cuda"))
    os.symlink("cuda-loop", str(ul / "cuda-loop"))  # a symlink loop
    os.symlink("cuda-12.9", str(ul / "cuda-dangling"))
    (ul / "cuda-bogus").mkdir()
    (ul / "cuda-bogus" / "version.json").write_bytes(b"\xff\xfe garbage {")
    return ul


def test_fake_usr_local_with_loop_and_garbage(tmp_path):
    ul = _fake_usr_local(tmp_path)
    info = tk.probe_toolkits(env={"PATH": ""}, usr_local=str(ul), run_nvcc=False)
    by_path = {pathlib.Path(t.path).name: t for t in info.toolkits}
    assert by_path["cuda-11.3"].version == "11.3.109"
    assert by_path["cuda-11.5"].version == "11.5.2"
    assert sorted(by_path["cuda-11.5"].sources) == sorted([str(ul / "cuda"), str(ul / "cuda-11.5")])
    assert by_path["cuda-bogus"].version is None and "version.json has no cuda.version" in by_path["cuda-bogus"].unknown
    assert info.unknown[str(ul / "cuda-loop")] == "symlink loop"
    assert info.unknown[str(ul / "cuda-dangling")] == "does not exist"
    assert (info.cuda_home, info.cuda_home_via) == (str(ul / "cuda"), "/usr/local/cuda")


def test_cuda_home_precedence(tmp_path):
    ul = _fake_usr_local(tmp_path)
    e = {"CUDA_HOME": str(ul / "cuda-11.3"), "CUDA_PATH": str(ul / "cuda-11.5"), "PATH": ""}
    assert tk.find_cuda_home(e, str(ul)) == (str(ul / "cuda-11.3"), "CUDA_HOME")
    e["CUDA_HOME"] = ""  # `os.environ.get('CUDA_HOME') or ...`: empty falls through
    assert tk.find_cuda_home(e, str(ul)) == (str(ul / "cuda-11.5"), "CUDA_PATH")
    bindir = ul / "cuda-11.5" / "bin"
    (bindir / "nvcc").write_text("#!/bin/sh\n")
    os.chmod(str(bindir / "nvcc"), 0o755)
    assert tk.find_cuda_home({"PATH": str(bindir)}, str(ul)) == (str(ul / "cuda-11.5"), "PATH nvcc")
    info = tk.probe_toolkits(env={"CUDA_HOME": str(tmp_path / "nope"), "PATH": str(bindir)}, usr_local=str(ul), run_nvcc=False)
    assert "does not exist" in info.unknown["CUDA_HOME"]
    assert "PATH nvcc" in next(t for t in info.toolkits if t.path.endswith("cuda-11.5")).sources


def test_nvcc_fallback_is_bounded(tmp_path):
    slow = tmp_path / "nvcc"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    os.chmod(str(slow), 0o755)
    ver, why = tk.run_nvcc_version(str(slow), timeout=0.5)
    assert ver is None and "timed out" in why


def test_conda_records_of_a_pytorch_channel_env(tmp_path):
    prefix = tmp_path / "yolov9"
    shutil.copytree(str(PROBE / "conda-yolov9"), str(prefix / "conda-meta"))
    (prefix / "conda-meta" / "cudnn-8.2.1-cuda11.3_0.json").write_text("{broken")
    info = tk.probe_toolkits(env={"PATH": ""}, prefix=str(prefix), usr_local=str(tmp_path / "none"), run_nvcc=False)
    pk = {p.name: p for p in info.conda_packages}
    assert sorted(pk) == ["cudatoolkit", "pytorch", "pytorch-mutex", "torchvision"]  # numpy is not CUDA-related
    assert (pk["cudatoolkit"].version, pk["cudatoolkit"].channel) == ("11.3.1", "conda-forge")
    assert (pk["pytorch"].build, pk["pytorch"].channel) == ("py3.8_cuda11.3_cudnn8.2.0_0", "pytorch")
    assert pk["pytorch-mutex"].build == "cuda"
    assert "bad JSON" in info.unknown["conda-meta/cudnn-8.2.1-cuda11.3_0.json"]
    assert info.toolkits == []  # cudatoolkit 11.x ships no nvcc


def test_short_channel():
    assert packages.short_channel({"channel": "https://conda.anaconda.org/pytorch/linux-64"}) == "pytorch"
    assert packages.short_channel({"channel": "https://repo.anaconda.com/pkgs/main/linux-64"}) == "pkgs/main"
    assert packages.short_channel({"channel": "conda-forge"}) == "conda-forge"
    assert packages.short_channel({"schannel": "nvidia", "channel": "x"}) == "nvidia"
    assert packages.parse_conda_record_filename("pytorch-mutex-1.0-cuda.json") == ("pytorch-mutex", "1.0", "cuda")


def test_nvidia_wheels_of_the_cu130_venv(torch_cu_python):
    site = str(venv_site_packages(torch_cu_python))
    wheels = {w.name: w.version for w in tk.list_nvidia_wheels([site])}
    assert wheels["cuda-toolkit"].startswith("13.0")
    assert wheels["nvidia-cuda-runtime"].startswith("13.0")
    assert "nvidia-cudnn-cu13" in wheels and "nvidia-nvjitlink" in wheels


def test_an_nvcc_wrapper_on_path_is_not_a_second_toolkit(tmp_path):
    """Issue 16: /usr/local/bin/nvcc, a `#!/bin/sh` + `exec /usr/local/cuda-13.0/bin/nvcc "$@"`
    wrapper (as on this project's dev machines), was listed as a toolkit at /usr/local."""
    ul = tmp_path / "usr" / "local"
    tkdir = ul / "cuda-13.0"
    (tkdir / "bin").mkdir(parents=True)
    (tkdir / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}')
    (tkdir / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    (ul / "bin").mkdir()
    (ul / "bin" / "nvcc").write_text('#!/bin/sh\nexec %s "$@"\n' % (tkdir / "bin" / "nvcc"))
    for p in (tkdir / "bin" / "nvcc", ul / "bin" / "nvcc"):
        os.chmod(str(p), 0o755)
    assert tk.wrapped_nvcc(str(ul / "bin" / "nvcc")) == str(tkdir / "bin" / "nvcc")
    assert tk.wrapped_nvcc(str(tkdir / "bin" / "nvcc")) is None  # a script, but no exec of another nvcc
    info = tk.probe_toolkits(env={"PATH": str(ul / "bin")}, usr_local=str(ul), run_nvcc=True)
    assert [t.path for t in info.toolkits] == [str(tkdir)]
    (only,) = info.toolkits
    assert only.version == "13.0.2" and "PATH nvcc" in only.sources and str(ul) in only.sources
    # what torch.utils.cpp_extension would take as CUDA_HOME: the wrapper's ../, as before
    assert (info.cuda_home, info.cuda_home_via) == (str(ul), "PATH nvcc")
    assert "wrapper" in info.found_via["nvcc"]
