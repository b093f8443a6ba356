"""Build step of the rmacoll wheel (metadata: pyproject.toml).

The package is pure Python (ctypes), but the wheel carries librmacoll: build_py
builds the library with CMake from the source tree this folder sits in (or
takes a prebuilt one), installs it into a staging prefix, and copies
librmacoll.so and its transport modules (librmacoll-<name>.so, found next to
the library) into rmacoll/lib/. The wheel is therefore platform-tagged
(py3-none-<platform>: one wheel serves every Python 3, not every OS or CPU).

Environment:
  RMACOLL_WHEEL_LIBRARY  a built librmacoll.so* to bundle instead of running
                         CMake (its librmacoll-*.so modules are taken from the
                         same folder); the source tree is then not needed
  RMACOLL_SOURCE_DIR     the rmacoll source tree (default: this folder's parent)
  RMACOLL_CMAKE_ARGS     extra arguments for the CMake configure step
                         (e.g. "-DRMACOLL_ENABLE_CUDA=OFF")
  CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default: the CPU count)

Only Debian's setuptools and wheel are needed (no PyPI): see docs/python.md.
"""

import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 has its own; older ones use the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None
        print("rmacoll setup: the wheel package is missing, so pip's bdist_wheel fails "
              "(Debian: apt-get install python3-wheel; use /usr/bin/python3 or a venv "
              "made with --system-site-packages)", file=sys.stderr)

HERE = os.path.dirname(os.path.abspath(__file__))


def _log(msg):
    print("rmacoll setup: " + msg, file=sys.stderr, flush=True)


def _source_dir():
    src = os.environ.get("RMACOLL_SOURCE_DIR") or os.path.dirname(HERE)
    if not (os.path.isfile(os.path.join(src, "CMakeLists.txt")) and
            os.path.isfile(os.path.join(src, "include", "rmacoll.h"))):
        raise SystemExit(
            "rmacoll setup: no rmacoll source tree at %s (the wheel is built from python/ "
            "inside a checkout; or set RMACOLL_SOURCE_DIR to one, or RMACOLL_WHEEL_LIBRARY "
            "to a built librmacoll.so)" % src)
    return src


def _libraries_from(libdir):
    """(librmacoll.so file, [module files]) in libdir; symlinks resolved."""
    lib = None
    for name in ("librmacoll.so", "librmacoll.so.0"):
        p = os.path.join(libdir, name)
        if os.path.exists(p):
            lib = os.path.realpath(p)
            break
    if lib is None:
        found = sorted(glob.glob(os.path.join(libdir, "librmacoll.so*")))
        if not found:
            raise SystemExit("rmacoll setup: no librmacoll.so in %s" % libdir)
        lib = os.path.realpath(found[0])
    modules = sorted(p for p in glob.glob(os.path.join(libdir, "librmacoll-*.so")))
    return lib, modules


def _cmake_build(build_temp):
    """Configures, builds and installs librmacoll into build_temp/stage;
    returns its library folder."""
    src = _source_dir()
    bdir = os.path.join(build_temp, "cmake")
    stage = os.path.join(build_temp, "stage")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit("rmacoll setup: cmake not found (Debian: apt-get install cmake)")
    args = [cmake, "-S", src, "-B", bdir,
            "-DCMAKE_INSTALL_PREFIX=" + stage,
            "-DCMAKE_INSTALL_LIBDIR=lib",
            "-DRMACOLL_BUILD_TESTS=OFF", "-DRMACOLL_BUILD_TOOLS=OFF",
            "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON",  # the MPI example is not packaged
            # no RUNPATH into the build tree; third-party folders outside the
            # system ones (a CUDA toolkit's lib/) are kept
            "-DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON"]
    args += shlex.split(os.environ.get("RMACOLL_CMAKE_ARGS", ""))
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    _log("building librmacoll with CMake in %s" % bdir)
    subprocess.check_call(args)
    subprocess.check_call([cmake, "--build", bdir, "-j", jobs])
    if os.path.isdir(stage):
        shutil.rmtree(stage)
    subprocess.check_call([cmake, "--install", bdir])
    return os.path.join(stage, "lib")


class BuildPyWithLibrary(build_py):
    """build_py, then librmacoll and its modules into <build_lib>/rmacoll/lib/."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install uses the checkout's build/ (rmacoll/_lib.py)
        prebuilt = os.environ.get("RMACOLL_WHEEL_LIBRARY")
        if prebuilt:
            if not os.path.exists(prebuilt):
                raise SystemExit("rmacoll setup: RMACOLL_WHEEL_LIBRARY=%s does not exist"
                                 % prebuilt)
            libdir = os.path.dirname(os.path.abspath(prebuilt))
            lib = os.path.realpath(prebuilt)
            modules = _libraries_from(libdir)[1]
        else:
            build_temp = self.get_finalized_command("build").build_temp
            lib, modules = _libraries_from(_cmake_build(os.path.abspath(build_temp)))
        dst = os.path.join(self.build_lib, "rmacoll", "lib")
        if os.path.isdir(dst):
            shutil.rmtree(dst)
        os.makedirs(dst)
        # one file per library, no symlinks (a wheel cannot hold them):
        # rmacoll/_lib.py loads lib/librmacoll.so; the core finds
        # librmacoll-<name>.so beside the library it runs from
        for src, name in [(lib, "librmacoll.so")] + [(m, os.path.basename(m)) for m in modules]:
            shutil.copyfile(os.path.realpath(src), os.path.join(dst, name))
            os.chmod(os.path.join(dst, name), 0o755)
            _log("bundled %s as rmacoll/lib/%s" % (src, name))


class BinaryDistribution(Distribution):
    """A wheel with a native library: installed to platlib, platform-tagged."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPyWithLibrary}

if bdist_wheel is not None:
    class BdistWheelPlatform(bdist_wheel):
        """py3-none-<platform>: ctypes, so any Python 3 on this platform."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = BdistWheelPlatform

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
