"""What the dynamic loader, and torch's own import, would load: /etc/ld.so.cache, the glibc
search simulated over a recordable filesystem, each CUDA library torch needs and its version,
`import torch` simulated on Linux, and the DLL side of it on native Windows.

Nothing is imported here: importing one module of the section does not import the others.
"""
