import sys

if __name__ == "__main__" and sys.argv[1:2] == ["shell"]:
    # the activation cold path: skip importing click and every command (cudafix/activation/runtime.py)
    from cudafix.activation.runtime import fast_main

    _rc = fast_main(sys.argv[1:])
    if _rc is not None:
        sys.exit(_rc)

if __name__ == "__main__":
    # `status` / `check` in their common forms: no click (cudafix/cli/fast.py), else the click CLI.
    from cudafix.cli import run

    run()

from cudafix.cli import main  # noqa: E402,F401
