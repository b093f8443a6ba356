#!/usr/bin/env bash
# Source this on a GPU machine that has CUDA and PyTorch but no Debian -dev
# packages and no network: it unpacks the .deb files carried in .devpkgs/
# (fetched on a Debian machine with scripts/gpu/fetch-debs.sh) into a sysroot
# of their own (never into /), and points pkg-config, CMake and the loader at it.
#   . scripts/gpu/setup.sh [SYSROOT=/tmp/sysroot]
sysroot=${1:-/tmp/sysroot}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$sysroot"
for f in "$top"/.devpkgs/*.deb; do dpkg -x "$f" "$sysroot"; done
lib=$sysroot/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_SYSROOT_DIR=$sysroot
export PKG_CONFIG_PATH=$lib/pkgconfig:$sysroot/usr/share/pkgconfig
export CMAKE_PREFIX_PATH=$sysroot/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo NCCL_NVLS_ENABLE=0
echo "sysroot $sysroot: $(ls "$top"/.devpkgs/*.deb | wc -l) packages unpacked"
