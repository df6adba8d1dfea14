"""The startup hook's work at `import torch` (the finder in _cudafix_startup calls hook.runtime.on_torch)."""
