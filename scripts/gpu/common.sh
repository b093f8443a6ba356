#!/usr/bin/env bash
# Sourced by the GPU scripts after `top` is set: OUT (the caller's default
# unless set), the clock t0, the exit status rc, and step, which prints a
# heading with the seconds since t0.
#   gpu_begin /tmp/default-out
gpu_begin() {
  OUT=${OUT:-$1}; mkdir -p "$OUT"
  t0=$(date +%s); rc=0
}
step() { echo; echo "==== $* (t+$(( $(date +%s) - t0 ))s)"; }
