import sys

if __name__ == "__main__" and sys.argv[1:2] == ["shell"]:
    # the activation cold path: skip importing click and every command (cudafix/activation/runtime.py)
    from cudafix.activation.runtime import fast_main

    _rc = fast_main(sys.argv[1:])
    if _rc is not None:
        sys.exit(_rc)

from cudafix.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
