#!/bin/sh
# check_install.sh PYTHON SRC WORKDIR LIBRARY - builds the rmacoll wheel from
# a copy of the package at SRC (python/) with PYTHON's pip, offline, bundling
# the already built LIBRARY (RMACOLL_WHEEL_LIBRARY: setup.py skips its CMake
# step; .ci/run's wheel step runs that one), installs the wheel into a plain
# venv (no system site packages) under WORKDIR, and runs wheel_check.py
# there from outside the source tree: the installed copy loads its bundled
# library and 2 processes make an exact alltoallv.
# Exit 77 (skipped) when PYTHON cannot build a wheel offline or make a venv
# (Debian: python3-pip python3-setuptools python3-wheel python3-venv).
set -eu
py=$1 src=$2 work=$3 lib=$4
rm -rf "$work"
mkdir -p "$work"
"$py" -c "import setuptools, wheel, pip" 2>/dev/null ||
  { echo "$py lacks pip, setuptools or wheel: skipped"; exit 77; }
"$py" -m venv "$work/venv" || { echo "no venv module: skipped"; exit 77; }
cp -rL "$src" "$work/src"   # -L: LICENSE is a link to the repository's
rm -rf "$work/src/build" "$work/src/dist" "$work/src"/*.egg-info "$work/src/rmacoll/lib"
RMACOLL_WHEEL_LIBRARY=$lib "$py" -m pip wheel --no-build-isolation --no-index --no-deps \
  -w "$work/dist" "$work/src"
whl=$(ls "$work"/dist/rmacoll-*.whl)
case $whl in
  *-py3-none-linux_*.whl) ;;
  *) echo "not a platform wheel: $whl" >&2; exit 1 ;;
esac
"$work/venv/bin/python" -m pip install --no-index --no-deps "$whl"
cp "$work/src/tests/wheel_check.py" "$work/"
rm -rf "$work/src"   # what runs now is the installed copy only
cd "$work"
env -u RMACOLL_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH "$work/venv/bin/python" wheel_check.py
