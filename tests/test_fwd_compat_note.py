"""forward-compat-mismatch decided from the library's own ELF note, as the NVIDIA Container
Toolkit >= 1.20 does (cmd/nvidia-cdi-hook/cudacompat/cuda-elf-header.go, UseCompat): the compat
libcuda is used when the kernel module's branch is in the note's "driver" list and the library's
version is newer than the module's.

Inputs: a real ELF built here with gcc + objcopy carrying the note (synthetic: its description is
the one recorded on the H200), checked against `readelf -n`; the H200's recorded `readelf -n`
(tests/fixtures/h200/libcuda-notes.txt) for the rule cases; error 803 for an older compat copy on
580.159.04 was measured on the H200 (docs/gpu.md).
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import struct
import subprocess

from cudafix import rules
from cudafix.model.findings import OK, PROBLEM, UNKNOWN
from cudafix.model.snapshot import DriverInfo, FwdCompatNote, Snapshot
from cudafix.probes.machine.driver import probe_driver
from cudafix.probes.machine.fwdnote import read_fwd_note
from tests.conftest import require
from tests.snapbuild import H200, snap

HERE = pathlib.Path(__file__).resolve().parent
NOTES = (HERE / "fixtures" / "h200" / "libcuda-notes.txt").read_text()
COMPAT_DIR = "/usr/local/cuda-13.0/compat"


def _readelf_notes(text: str) -> dict:
    """{file: decoded JSON} from `readelf -n --wide` output (the hex of 'description data')."""
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^(?:\+ readelf -n --wide|== )\s*(\S+)$", line)
        if m:
            current = m.group(1)
        m = re.search(r"NVIDIA Corporation\s+0x[0-9a-f]+\s.*description data: ((?:[0-9a-f]{2} )+)", line)
        if m and current:
            raw = bytes.fromhex(m.group(1).replace(" ", "")).rstrip(b"\0")
            out[current] = json.loads(raw)
    return out


RECORDED = _readelf_notes(NOTES)
COMPAT_NOTE = RECORDED["/usr/local/cuda-13.0/compat/libcuda.so.580.95.05"]
DRIVER_NOTE = RECORDED["/usr/local/nvidia/lib64/libcuda.so.580.159.04"]


def _build_lib(tmp_path: pathlib.Path, desc: bytes, name: str = "libcuda.so.580.95.05", owner: bytes = b"NVIDIA Corporation\0") -> pathlib.Path:
    for tool in ("gcc", "objcopy", "readelf"):
        require(shutil.which(tool), "%s is needed to build a real ELF with a note" % tool)
    src = tmp_path / "a.c"
    src.write_text("int cudafix_fwd_note_test(void) { return 1; }\n")
    plain = tmp_path / "plain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plain), str(src)], check=True)
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731  (ELF notes pad name and desc to 4)
    note = tmp_path / "note.bin"
    note.write_bytes(struct.pack("<III", len(owner), len(desc), 0) + pad(owner) + pad(desc))
    out = tmp_path / name
    subprocess.run(["objcopy", "--add-section", ".note.cuda.fwd_compatibility=%s" % note, str(plain), str(out)], check=True)
    return out


def test_note_read_like_readelf(tmp_path):
    desc = json.dumps(COMPAT_NOTE, separators=(",", ":")).encode() + b"\0"
    lib = _build_lib(tmp_path, desc)
    text = subprocess.run(["readelf", "-n", "--wide", str(lib)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"NVIDIA Corporation\s+0x([0-9a-f]+)\s.*description data: ((?:[0-9a-f]{2} )+)", text)
    assert m, text
    truth = json.loads(bytes.fromhex(m.group(2).replace(" ", "")).rstrip(b"\0"))
    note, why = read_fwd_note(str(lib))
    assert why is None
    assert (note.format, note.cuda_version, note.driver, note.device) == (
        truth["format"], truth["CUDA version"], truth["driver"], truth["device"])
    assert note.path == str(lib)


def test_no_note_wrong_owner_and_bad_json_are_reasons(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    lib = _build_lib(a, b'{"format":1}\0')  # no driver list
    assert read_fwd_note(str(lib))[0] is None and "driver" in read_fwd_note(str(lib))[1]
    b = tmp_path / "b"
    b.mkdir()
    lib = _build_lib(b, json.dumps(COMPAT_NOTE).encode(), owner=b"GNU\0")
    assert read_fwd_note(str(lib))[0] is None and "GNU" in read_fwd_note(str(lib))[1]
    plain = a / "plain.so"
    note, why = read_fwd_note(str(plain))
    assert note is None and "no .note.cuda.fwd_compatibility" in why


def test_probe_records_the_picked_libcudas_note(tmp_path):
    lib = _build_lib(tmp_path, json.dumps(COMPAT_NOTE).encode() + b"\0")
    (tmp_path / "libcuda.so.1").symlink_to(lib.name)
    info = probe_driver({"LD_LIBRARY_PATH": str(tmp_path)}, call_driver_api=False)
    assert info.libcuda_path == str(lib)
    assert info.libcuda_fwd_note is not None and info.libcuda_fwd_note.driver == COMPAT_NOTE["driver"]
    assert "libcuda_fwd_note" in info.found_via
    # round trip through the snapshot JSON; an old snapshot without the key still loads
    s = Snapshot(driver=info)
    back = Snapshot.from_json(s.to_json())
    assert back.driver.libcuda_fwd_note == info.libcuda_fwd_note
    d = json.loads(s.to_json())
    del d["driver"]["libcuda_fwd_note"]
    assert Snapshot.from_json(json.dumps(d)).driver.libcuda_fwd_note is None


def _note(path: str, recorded: dict) -> dict:
    return {"path": path, "format": recorded["format"], "cuda_version": recorded["CUDA version"],
            "driver": recorded["driver"], "device": recorded["device"]}


def _compat(kernel: str, lib_version: str, recorded_note=None) -> Snapshot:
    lib = "%s/libcuda.so.%s" % (COMPAT_DIR, lib_version)
    over = {
        "env.LD_LIBRARY_PATH": COMPAT_DIR + ":/usr/local/nvidia/lib64:/usr/local/nvidia/lib",
        "libraries.ld_library_path": [COMPAT_DIR, "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"],
        "driver.kernel_version": kernel,
        "driver.libcuda_path": lib,
        "driver.libcuda_version": lib_version,
        "driver.compat_libcuda": [lib],
    }
    s = snap(H200, over)
    if recorded_note is not None:
        s.driver.libcuda_fwd_note = FwdCompatNote(**_note(lib, recorded_note))
    return s


def _run(s: Snapshot):
    return [r for r in rules.run(s) if r.rule.id == "forward-compat-mismatch"][0]


def test_recorded_h200_older_compat_copy_is_803_by_its_note():
    # measured on the H200: compat 580.95.05 on module 580.159.04 -> error 803 (docs/gpu.md)
    run = _run(_compat("580.159.04", "580.95.05", COMPAT_NOTE))
    assert run.verdict == PROBLEM
    text = " ".join([run.outcomes[0].message] + list(run.outcomes[0].evidence))
    assert "803" in text and ".note.cuda.fwd_compatibility" in text and "R580" in text


def test_newer_library_of_the_same_branch_is_used():
    # the toolkit's rule: R580 listed, 580.159.04 > 580.95.05 -> the compat library is used
    # (the driver's own 580.159.04 carries the same note, recorded); an H200 is a data-center GPU
    run = _run(_compat("580.95.05", "580.159.04", DRIVER_NOTE))
    assert run.verdict == OK, run.outcomes[0].message
    assert "NEWER driver branch" not in " ".join(run.outcomes[0].evidence)


def test_unlisted_kernel_branch_is_803():
    # R560 is not in the note's list [535, 550, 565, 570, 575, 580]: the toolkit does not use it
    run = _run(_compat("560.35.03", "580.95.05", COMPAT_NOTE))
    assert run.verdict == PROBLEM
    assert "R560" in " ".join(run.outcomes[0].evidence)


def test_listed_older_base_branch_is_used():
    run = _run(_compat("550.54.14", "580.95.05", COMPAT_NOTE))
    assert run.verdict == OK


def test_without_a_note_the_branch_rule_is_the_fallback_and_says_so():
    run = _run(_compat("580.95.05", "580.159.04"))
    assert run.verdict == UNKNOWN  # same branch, newer: only the note could tell
    assert any("no forward-compat note" in e for e in run.outcomes[0].evidence)
    run = _run(_compat("580.159.04", "580.95.05"))
    assert run.verdict == PROBLEM and "803" in run.outcomes[0].message
    assert any("no forward-compat note" in e for e in run.outcomes[0].evidence)


def test_a_note_of_another_file_is_not_used():
    s = _compat("560.35.03", "580.95.05", COMPAT_NOTE)
    s.driver.libcuda_fwd_note = FwdCompatNote(path="/elsewhere/libcuda.so.580.95.05", driver=[560])
    assert any("no forward-compat note" in e for e in _run(s).outcomes[0].evidence)
    assert isinstance(s.driver, DriverInfo)
