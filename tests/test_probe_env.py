"""Environment variables and the JIT cache."""

from __future__ import annotations

import os

from cudafix.probes.pyenv import environment as envp


def test_collect_env_keeps_empty_and_drops_unrelated():
    env = {"CUDA_VISIBLE_DEVICES": "", "HOME": "/root", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
           "CUDA_SOMETHING_NEW": "1", "LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64:", "CONDA_PREFIX": "/opt/conda/envs/yolov9"}
    got = envp.collect_env(env)
    assert got["CUDA_VISIBLE_DEVICES"] == ""
    assert "HOME" not in got
    assert set(got) == {"CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_SOMETHING_NEW", "LD_LIBRARY_PATH", "CONDA_PREFIX"}


def test_cache_maxsize():
    assert envp.parse_cache_maxsize(None) == (None, envp.CACHE_DEFAULT_NOTE)  # the default's size: unknown
    assert envp.parse_cache_maxsize("1073741824") == (1073741824, None)
    assert envp.parse_cache_maxsize(str(10 ** 12)) == (4294967296, None)
    size, why = envp.parse_cache_maxsize("1G")
    assert size is None and "not a byte count" in why


def test_jit_cache_counts_bytes_and_survives_symlink_loops(tmp_path):
    cache = tmp_path / "cc"
    (cache / "a" / "b").mkdir(parents=True)
    (cache / "a" / "b" / "x").write_bytes(b"1" * 1000)
    (cache / "index").write_bytes(b"2" * 24)
    os.symlink(str(cache), str(cache / "a" / "loop"))
    jc = envp.probe_jit_cache({"CUDA_CACHE_PATH": str(cache), "CUDA_CACHE_MAXSIZE": "65536", "CUDA_CACHE_DISABLE": "0"})
    assert (jc.path, jc.maxsize, jc.maxsize_via, jc.disabled) == (str(cache), 65536, "CUDA_CACHE_MAXSIZE", False)
    assert jc.used_bytes == 1024 and jc.writable is True


def test_jit_cache_default_path_not_yet_created(tmp_path):
    jc = envp.probe_jit_cache({"HOME": str(tmp_path), "CUDA_CACHE_DISABLE": "1"})
    assert jc.path == str(tmp_path / ".nv" / "ComputeCache")
    assert jc.disabled is True and jc.used_bytes == 0 and jc.writable is True
    assert jc.maxsize is None and jc.maxsize_via == "driver default" and "size unknown" in jc.unknown["maxsize_default"]


def test_jit_cache_bad_values(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    jc = envp.probe_jit_cache({"CUDA_CACHE_PATH": str(f), "CUDA_CACHE_MAXSIZE": "lots", "CUDA_CACHE_DISABLE": "yes"})
    assert jc.maxsize is None and "maxsize" in jc.unknown
    assert "disabled" in jc.unknown
    assert jc.writable is False and "not a directory" in jc.unknown["used_bytes"]


def test_dir_size_is_bounded(tmp_path):
    for i in range(30):
        (tmp_path / str(i)).write_bytes(b"")
    size, why = envp.dir_size(str(tmp_path), max_files=10)
    assert size is None and "more than 10" in why
