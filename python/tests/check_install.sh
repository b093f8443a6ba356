#!/bin/sh
# check_install.sh PYTHON SRC WORKDIR LIBRARY - installs a copy of the
# package at SRC (python/) with LIBRARY bundled into it, with pip, offline,
# into a fresh venv under WORKDIR, then checks from outside the source tree
# that the installed package loads its bundled library and makes a call.
# Exit 77 (skipped) when PYTHON cannot make a venv with pip, setuptools and
# wheel (Debian: python3-venv python3-setuptools python3-wheel).
set -eu
py=$1 src=$2 work=$3 lib=$4
rm -rf "$work"
mkdir -p "$work"
"$py" -m venv --system-site-packages "$work/venv" || { echo "no venv module: skipped"; exit 77; }
"$work/venv/bin/python" -c "import setuptools, wheel" 2>/dev/null ||
  { echo "$py lacks setuptools or wheel: skipped"; exit 77; }
cp -r "$src" "$work/src"
rm -rf "$work/src/tests" "$work/src/build" "$work/src"/*.egg-info
mkdir -p "$work/src/rmacoll/lib"
cp "$lib" "$work/src/rmacoll/lib/librmacoll.so"
"$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
  "$work/src"
cd "$work"
rm -rf "$work/src"   # what runs now is the installed copy only
env -u RMACOLL_LIBRARY -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import os, sys
import rmacoll
site = os.path.dirname(os.path.dirname(rmacoll.__file__))
assert site.startswith(sys.prefix), (rmacoll.__file__, sys.prefix)
path = rmacoll.library_path()
assert path == os.path.join(site, "rmacoll", "lib", "librmacoll.so"), path
import array
x = array.array("i", range(6))
y = array.array("i", [-1] * 6)
with rmacoll.Communicator(0, 1, rmacoll.get_unique_id()) as c:
    c.alltoallv(x.buffer_info()[0], [6], [0], y.buffer_info()[0], [6], [0], "int32")
assert list(y) == list(range(6)), list(y)
print("installed", rmacoll.__file__, "library", path, "ok")
PY
