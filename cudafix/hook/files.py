"""The startup hook's two files at the root of site-packages, as data (docs/hook.md).

`cudafix hooks install` writes them from here: in a pip install their only other copy is the
installed file itself, which `hooks uninstall` removes (issue 35).  The checkout's cudafix.pth and
cudafix.start, which the wheel ships (setup.py), are these bytes (tests/test_first_run_breaks.py).
"""

from __future__ import annotations

PTH = b'# cudafix startup hook (docs/hook.md): _cudafix_startup.py of this directory, never via sys.path.\nimport sys;exec("try:\\n import _frozen_importlib_external as e\\n l=e.SourceFileLoader(\'_cudafix_startup\',sitedir+\'/_cudafix_startup.py\');m=type(sys)(l.name);m.__file__=l.path;l.exec_module(m);sys.modules.setdefault(l.name,m).run()\\nexcept Exception:pass")\n'

START = b'# cudafix startup hook, PEP 829 form (Python >= 3.15): disables the import line of cudafix.pth.\n_cudafix_startup:run\n'

# file name at the root of site-packages -> its bytes
FILES = (("cudafix.pth", PTH), ("cudafix.start", START))
