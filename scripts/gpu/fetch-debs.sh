#!/usr/bin/env bash
# On a Debian machine: download the build and test dependencies that a GPU
# machine lacks into .devpkgs/ (git-ignored), for scripts/gpu/setup.sh.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$top/.devpkgs"
cd "$top/.devpkgs"
apt-get download libcyaml1 libcyaml-dev libyaml-0-2 libyaml-dev libcmocka0 libcmocka-dev \
  libfabric1 libfabric-dev libibverbs1 libibverbs-dev librdmacm1 libnl-3-200 \
  libnl-route-3-200 libpsm2-2 libpmix2 libpmix-dev libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libhwloc15 libmunge2 libcjson1 libcjson-dev
