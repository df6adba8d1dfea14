"""Binary formats read without loading them: ELF headers and dynamic symbols, Windows PE images,
the .nv_fatbin containers of device code, and a statically linked CUDA runtime's version.

Nothing is imported here: importing one module of the section does not import the others.
"""
