"""Only what setup.cfg cannot say: put cudafix.pth and cudafix.start at the wheel root.

Those two files must land in the root of site-packages (the site module reads ``*.pth`` files
only there).  ``data_files`` are relative to the install prefix, whose site-packages path
depends on the Python version, so they cannot express it; a build_py that copies the files
into build_lib (as setuptools does for its own distutils-precedence.pth) puts them in the
wheel's purelib root, and into its RECORD, so ``pip uninstall`` removes them too.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

SITE_PACKAGES_ROOT_FILES = ("cudafix.pth", "cudafix.start")


class build_py_with_startup_files(build_py):
    def run(self):
        super().run()
        for name in SITE_PACKAGES_ROOT_FILES:
            self.copy_file(name, os.path.join(self.build_lib, name), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        return list(outputs) + [os.path.join(self.build_lib, n) for n in SITE_PACKAGES_ROOT_FILES]


setup(cmdclass={"build_py": build_py_with_startup_files})
