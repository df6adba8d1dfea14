"""Child of tests/test_windows_snapshot.py: take_snapshot() as on Windows (os.uname / getuid / geteuid
removed, the platform win-amd64) over a real Windows wheel tree; prints one JSON line."""
import os, sys, json, sysconfig
for n in ("uname", "getuid", "geteuid", "getgid", "getegid"):
    if hasattr(os, n):
        delattr(os, n)
sysconfig.get_platform = lambda: "win-amd64"
site = sys.argv[1]
sys.path.insert(0, site)
from cudafix import probes
snap = probes.take_snapshot(env={"PATH": "", "LOCALAPPDATA": sys.argv[2]}, cache_dir=sys.argv[2], scan_extensions=False)
print(json.dumps({"errors": snap.probe_errors, "windows": snap.windows.probed, "failure": snap.windows.dll_failure,
                  "torch": [t.version for t in snap.torch], "platform": snap.python.platform}))
