"""Builds kv's Python binding, the package kv with its C extension kv._kv.

    python3 -m pip install --no-build-isolation ./python

compiles kv's library sources (util/ filter/ sstable/ kv/ of the checkout
this file is in: the lists come from the top-level CMakeLists.txt) into the
extension, linked with -llmdb -lzstd -lxxhash -lpthread -lm (Debian:
liblmdb-dev libzstd-dev libxxhash-dev). With KV_BUILD_DIR set to a CMake
build directory (an absolute path: pip runs this file from python/), the
extension links that build's libkv.a instead.
Nothing is fetched from the network.
"""

import os
import re
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(HERE)
VERSION = "0.1.0"
BUILD_DIR = os.environ.get("KV_BUILD_DIR")
BUILD_DIR = os.path.abspath(BUILD_DIR) if BUILD_DIR else None
os.chdir(HERE)  # the paths below are relative to python/, wherever setup.py runs from


def cmake_modules():
    """The public headers and sources of each kv_module() call in the
    top-level CMakeLists.txt: (headers, sources), paths relative to REPO."""
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        text = f.read()
    headers, sources = [], []
    for body in re.findall(r"^kv_module\(([^)]*)\)", text, re.M):
        words = body.split()
        section = None
        for w in words[1:]:
            if w in ("PUBLIC", "EXPORTS", "BELOW", "SOURCES", "LIBS"):
                section = w
            elif section == "PUBLIC":
                headers.append(w)
            elif section == "SOURCES":
                sources.append(w)
    if not sources:
        raise SystemExit("setup.py: no kv_module sources found in %s/CMakeLists.txt" % REPO)
    return headers, sources


class BuildExt(build_ext):
    """Copies the public headers where the sources look for them
    (<kv/status.h>, ...) and compiles on every CPU."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext):
        if not BUILD_DIR:
            gen = os.path.join(os.path.abspath(self.build_temp), "kvinclude")
            os.makedirs(os.path.join(gen, "kv"), exist_ok=True)
            for h in cmake_modules()[0]:
                shutil.copyfile(os.path.join(REPO, h), os.path.join(gen, "kv", os.path.basename(h)))
            ext.include_dirs.insert(0, gen)
        super().build_extension(ext)


BINDING = ["kv/_kv.c", "kv/_kv_db.c", "kv/_kv_iter.c", "kv/_kv_objects.c"]
cflags = ["-std=c11", "-fvisibility=hidden", "-O2"]
build_dir = BUILD_DIR
if build_dir:
    ext = Extension("kv._kv", sources=BINDING, include_dirs=[os.path.join(build_dir, "include")],
                    extra_objects=[os.path.join(build_dir, "libkv.a")],
                    libraries=["lmdb", "zstd", "xxhash", "pthread", "m"],
                    extra_compile_args=cflags)
else:
    lib = [os.path.join(REPO, s) for s in cmake_modules()[1]]
    ext = Extension("kv._kv", sources=BINDING + lib, include_dirs=[REPO],
                    libraries=["lmdb", "zstd", "xxhash", "pthread", "m"],
                    extra_compile_args=cflags)

setup(
    name="kv",
    version=VERSION,
    description="kv, an LSM key-value store with per-table Bloom filters, with plyvel's API",
    packages=["kv"],
    package_dir={"kv": "kv"},
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
    zip_safe=False,
)
