"""torch / torchvision without importing them: the real venvs, a fake conda env, bad inputs."""

from __future__ import annotations

import pathlib
import shutil


from cudafix.probes.pyenv import packages
from cudafix.probes.pyenv import torch_build as tb
from cudafix.model import cuda as cudaver
from tests.conftest import FIXTURES, venv_site_packages

CONDA_META = FIXTURES / "probe" / "conda-yolov9"

# torch/version.py as torch 1.10's tools/generate_torch_version.py writes it (conda builds carry
# no local "+cuXXX" part); torchvision 0.11's setup.py writes `cuda` as code run at import.
TORCH_110_VERSION_PY = """__version__ = '1.10.0'
debug = False
cuda = '11.3'
git_version = '36449ea93134574c2a22b87baad3de0bf8d64d42'
hip = None
"""
TORCHVISION_011_VERSION_PY = """__version__ = '0.11.1'
git_version = 'fa347eb9f38c1759b73677a11b17335191e3f602'
from torchvision.extension import _check_cuda_version
if _check_cuda_version() > 0:
    cuda = _check_cuda_version()
"""


def test_real_cu130_venv(torch_cu_python):
    site = str(venv_site_packages(torch_cu_python))
    builds = tb.probe_torch([site], prefix=str(pathlib.Path(site).parents[2]))
    assert len(builds) == 1
    b = builds[0]
    assert (b.version, b.cuda, b.hip) == ("2.14.1+cu130", "13.0", None)
    assert b.dist.version == "2.14.1" and b.dist.origin == "pip"  # PyPI metadata drops "+cu130"
    assert any(r.startswith("nvidia-cudnn-cu13==") for r in b.dist.requires)
    assert b.package_dir == site + "/torch"
    assert not b.unknown
    libs = [pathlib.Path(a.library).name for a in b.arch]
    assert "libtorch_cuda.so" in libs
    main = b.arch[libs.index("libtorch_cuda.so")]
    assert main.unknown is None and "sm_90" in main.sass


def test_real_cpu_venv(torch_cpu_python):
    site = str(venv_site_packages(torch_cpu_python))
    (b,) = tb.probe_torch([site])
    assert (b.version, b.cuda, b.dist.version) == ("2.13.0+cpu", None, "2.13.0+cpu")
    assert b.arch == [] and "CPU" in b.found_via["arch"]


def test_parse_version_py_never_executes():
    vp = tb.parse_version_py(TORCHVISION_011_VERSION_PY + "\nimport os\nos.system('false')\n")
    assert vp == {"__version__": "0.11.1", "git_version": "fa347eb9f38c1759b73677a11b17335191e3f602"}
    assert tb.parse_version_py("cuda: Optional[str] = '13.0'\n") == {"cuda": "13.0"}
    assert tb.parse_version_py("this is ( not python") == {}


def test_cuda_variant_helpers():
    assert cudaver.version_text_or_none(11030) == "11.3"  # torchvision's runtime `cuda` integer
    assert cudaver.version_text_or_none(12080) == "12.8"
    assert tb.cuda_from_local_version("0.11.0+cu113") == "11.3"
    assert tb.cuda_from_local_version("2.14.1+cu130") == "13.0"
    assert tb.cuda_from_local_version("2.13.0+cpu") is None
    assert tb.cuda_from_conda_build("py3.8_cuda11.3_cudnn8.2.0_0") == "11.3"
    assert tb.cuda_from_conda_build("cuda126_mkl_py312_h1234567_300") == "12.6"
    assert tb.cuda_from_conda_build("cuda112py39h1234567_1") == "11.2"
    assert tb.cuda_from_conda_build("py38_cu113") == "11.3"
    assert tb.cuda_from_conda_build("py3.8_cpu_0") is None
    assert packages.parse_dist_dirname("torch-1.10.0-py3.8.egg-info") == ("torch", "1.10.0")
    assert packages.parse_dist_dirname("nvidia_cublas-13.1.1.3.dist-info") == ("nvidia-cublas", "13.1.1.3")
    assert packages.parse_dist_dirname("garbage.dist-info") is None


def make_conda_yolov9(tmp_path: pathlib.Path) -> pathlib.Path:
    """A conda prefix shaped like the yolov9 env of issue 8 (pytorch channel, cudatoolkit 11.3)."""
    prefix = tmp_path / "envs" / "yolov9"
    shutil.copytree(str(CONDA_META), str(prefix / "conda-meta"))
    site = prefix / "lib" / "python3.8" / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text(TORCH_110_VERSION_PY)
    egg = site / "torch-1.10.0-py3.8.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 1.10.0\n")
    (egg / "requires.txt").write_text("typing_extensions\n")
    (site / "torchvision").mkdir()
    (site / "torchvision" / "__init__.py").write_text("")
    (site / "torchvision" / "version.py").write_text(TORCHVISION_011_VERSION_PY)
    egg = site / "torchvision-0.11.1-py3.8.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.11.1\n")
    return prefix


def test_fake_conda_pytorch_channel_env(tmp_path):
    prefix = make_conda_yolov9(tmp_path)
    site = str(prefix / "lib" / "python3.8" / "site-packages")
    (b,) = tb.probe_torch([site], prefix=str(prefix))
    assert (b.version, b.cuda, b.dist.version) == ("1.10.0", "11.3", "1.10.0")
    assert b.dist.origin == "conda"
    assert b.dist.conda_build == "py3.8_cuda11.3_cudnn8.2.0_0"
    assert b.dist.conda_channel == "pytorch"
    assert "cudatoolkit >=11.3,<11.4" in b.dist.requires
    assert "no libtorch_cuda" in b.unknown["arch"]  # this fake has no libraries
    (v,) = tb.probe_torchvision([site], prefix=str(prefix))
    assert (v.version, v.cuda, v.dist.origin) == ("0.11.1", "11.3", "conda")
    assert v.found_via["cuda"] == "conda build string py38_cu113"
    assert v.requires_torch == "pytorch 1.10.0"


def test_torch_dir_without_version_py_and_broken_dist(tmp_path):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch-2.1.0.dist-info").mkdir()  # no METADATA
    (b,) = tb.probe_torch([str(site)])
    assert b.version is None and "version.py" in b.unknown["version"]
    assert "METADATA" in b.unknown["dist"]
    assert b.dist.version == "2.1.0"  # from the directory name


def test_two_installs_in_sys_path_order_and_orphan_metadata_last(tmp_path):
    a, b_, c = tmp_path / "user", tmp_path / "site", tmp_path / "orphan"
    for d, ver in ((a, "2.1.0+cu121"), (b_, "2.14.1+cu130")):
        (d / "torch").mkdir(parents=True)
        (d / "torch" / "version.py").write_text("__version__ = '%s'\ncuda = '%s'\nhip = None\ngit_version = 'x'\n" % (ver, ver[-3:-1] + "." + ver[-1]))
        di = d / ("torch-%s.dist-info" % ver.split("+")[0])
        di.mkdir()
        (di / "METADATA").write_text("Name: torch\nVersion: %s\n" % ver.split("+")[0])
        (di / "INSTALLER").write_text("pip\n")
    (c / "torch-2.0.0.dist-info").mkdir(parents=True)
    builds = tb.probe_torch([str(c), str(a), str(b_)], scan_arch=False)
    assert [x.version for x in builds] == ["2.1.0+cu121", "2.14.1+cu130", None]
    assert builds[0].cuda == "12.1"
    assert "package_dir" in builds[2].unknown


def test_no_torch_at_all(tmp_path):
    assert tb.probe_torch([str(tmp_path), str(tmp_path / "missing"), ""], scan_arch=False) == []
    assert tb.probe_torchvision([str(tmp_path)]) == []
