"""Generator of tests/fixtures/snapshots/windows_torch2.13_cpu_no_c10.json: the Windows code paths
over the real torch 2.13.0 win_amd64 wheel (tests/fetch_win_wheels.sh) with c10.dll removed, a
stated RTX 3060 (NVML) and a stated 2 GiB commit limit; the tree's path is then written as the
Windows path it stands for.  Run: python -m tests.wingen (rewrites the fixture)."""

from __future__ import annotations

import json
import pathlib
import tempfile

from tests.test_windows_snapshot import GIB, site_with, win_snapshot

OUT = pathlib.Path(__file__).parent / "fixtures" / "snapshots" / "windows_torch2.13_cpu_no_c10.json"
WIN_SITE = "C:\\Users\\u\\venv\\Lib\\site-packages"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        site = site_with(pathlib.Path(tmp), drop=("c10.dll",))
        snap = win_snapshot(site, commit_limit=2 * GIB)
        text = snap.to_json()
        text = text.replace(json.dumps(site)[1:-1].replace("/", "\\\\"), WIN_SITE.replace("\\", "\\\\"))
        text = text.replace(json.dumps(site)[1:-1], WIN_SITE.replace("\\", "\\\\"))
    esc = WIN_SITE.replace("\\", "\\\\")
    text = text.replace(esc + "/torch", esc + "\\\\torch")
    data = json.loads(text)
    data["created"] = "2026-12-01T19:15:00+00:00"
    data["_fixture"] = {"kind": "synthetic", "generator": "python -m tests.wingen (the Windows code paths over the real torch 2.13.0 win_amd64 wheel)"}
    OUT.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
