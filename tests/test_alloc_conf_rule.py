"""alloc-conf-invalid with and without the option names read from torch's libraries.

The fixture is transcribed from ZhengPeng7/BiRefNet#179 (torch 2.0.1: "RuntimeError: Unrecognized
CachingAllocator option: expandable_segments"); the names come from the real torch 2.0.1 wheel's
libc10_cuda.so (tests/make_venvs.sh venv torch-201) when it is there.
"""

from __future__ import annotations

import os

import pytest

from cudafix import rules
from tools import alloc_conf_proof as proof
from cudafix.knowledge import alloc_syntax
from cudafix.knowledge.alloc_conf import KNOWN_NAMES
from cudafix.model.fixes import SET, UNSET
from cudafix.probes.pyenv.alloc_conf import read_alloc_keys
from tests.test_rules_fixtures import load


def _finding(snap):
    return [f for f in rules.findings(rules.run(snap)) if f.rule == "alloc-conf-invalid"][0]


def test_old_snapshot_falls_back_to_the_table_and_says_so():
    snap = load("birefnet_alloc_conf_invalid.json")
    assert snap.primary_torch.alloc_conf is None
    f = _finding(snap)
    assert f.severity == "error"
    assert any("cudafix's table of keys per release was used" in e for e in f.evidence)


def test_names_from_the_real_torch_201_library_decide():
    tdir = proof.torch_dir(os.path.join(proof.venv_root(), "torch-201"))
    if tdir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("test venv torch-201 missing: tests/make_venvs.sh builds it")
        pytest.skip("torch-201 venv not built here")
    snap = load("birefnet_alloc_conf_invalid.json")
    snap.primary_torch.alloc_conf = read_alloc_keys(tdir, KNOWN_NAMES)
    assert snap.primary_torch.alloc_conf.parser == "lexer"
    f = _finding(snap)
    assert f.severity == "error" and f.auto
    # the user's report: "RuntimeError: Unrecognized CachingAllocator option: expandable_segments"
    assert any("Unrecognized CachingAllocator option: expandable_segments" in e for e in f.evidence)
    assert [(op.op, op.name) for op in f.fix.env.ops] == [(UNSET, "PYTORCH_CUDA_ALLOC_CONF")]

    snap.env["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:512, expandable_segments:True,garbage_collection_threshold:0.6"
    f = _finding(snap)
    assert [(op.op, op.name, op.value) for op in f.fix.env.ops] == [
        (SET, "PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512,garbage_collection_threshold:0.6")]

    # a bad value (2.0.1: max_split_size_mb must be > 20) is never repaired automatically; the
    # command's value is one torch 2.0.1's own parser accepts
    bad = "max_split_size_mb:20,garbage_collection_threshold:0.6,expandable_segments:True"
    snap.env["PYTORCH_CUDA_ALLOC_CONF"] = bad
    f = _finding(snap)
    assert f.severity == "error" and not f.auto
    (cmd,) = f.fix.commands
    assert cmd.startswith("export PYTORCH_CUDA_ALLOC_CONF=")
    fixed = cmd.split("=", 1)[1]
    verdicts = proof.torch_verdicts(os.path.join(proof.venv_root(), "torch-201"), proof.VENVS[1][1], [bad, fixed])
    assert verdicts[bad][0] == "rejected" and verdicts[fixed][0] == "accepted", verdicts


def test_repair_keeps_the_users_items_verbatim_and_in_order():
    value = "roundup_power2_divisions:[256:1, 512:2,>:8],bogus:1,expandable_segments:True"
    assert alloc_syntax.without(value, "tokenizer", ["bogus"]) == "roundup_power2_divisions:[256:1, 512:2,>:8],expandable_segments:True"
    # torch 1.10 splits on spaces too and ignores an item without ':'
    assert alloc_syntax.without("max_split_size_mb:128 bogus:1 note", "regex", ["bogus", "note"]) == "max_split_size_mb:128,note"


def test_probe_on_bad_libraries_says_unknown_and_the_rule_falls_back(tmp_path):
    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)
    (lib / "libc10_cuda.so").write_bytes(b"not an ELF file at all")
    info = read_alloc_keys(str(tmp_path / "torch"), ["expandable_segments"])
    assert info.unknown and "not an ELF file" in info.unknown and info.accepted == []
    (lib / "libc10_cuda.so").unlink()
    info = read_alloc_keys(str(tmp_path / "torch"), ["expandable_segments"])
    assert info.unknown.startswith("no libc10_cuda.so in ")

    snap = load("birefnet_alloc_conf_invalid.json")
    snap.primary_torch.alloc_conf = info
    f = _finding(snap)
    assert any("no libc10_cuda.so in " in e and "cudafix's table" in e for e in f.evidence)


def test_an_elf_without_the_parser_texts_is_not_read_as_a_parser(tmp_path):
    # a real ELF library of this machine that is not torch's: no allocator parser texts in it
    import glob

    real = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libz.so.1*") + glob.glob("/lib/x86_64-linux-gnu/libz.so.1*"))
    if not real:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("no libz.so.1 on this machine")
    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)
    (lib / "libc10_cuda.so").write_bytes(open(real[0], "rb").read())
    info = read_alloc_keys(str(tmp_path / "torch"), ["expandable_segments"])
    assert info.unknown and "no allocator parser text" in info.unknown
