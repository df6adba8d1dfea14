"""Which modules contribute rules, in report order."""

from cudafix.rules import arch, driver, env, extensions, gpu_driver, install, libs, nccl, toolkit, torch, windows, wsl  # noqa: F401

MODULES = (driver, wsl, windows, gpu_driver, torch, install, arch, extensions, libs, toolkit, env, nccl)
