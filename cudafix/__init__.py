"""cudafix: make the CUDA stack under PyTorch right before torch loads."""

__version__ = "0.1.0"
