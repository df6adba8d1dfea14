"""The Python environment's probes: its environment variables, its installed distributions, the
torch builds on its sys.path (read as text), the CUDA toolkits and nvidia-* wheels, torch's wheel
requirements and allocator options, and the CUDA extension modules it can import.

Nothing is imported here: importing one module of the section does not import the others.
"""
