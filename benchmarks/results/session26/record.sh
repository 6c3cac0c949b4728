#!/bin/bash
# On the device machine, from the repository root (session 26's recordings, at the session's
# start engine: no engine change had been made yet):
#   bash benchmarks/results/session26/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# fla-core 0.6.0 and einops come unpacked from .s26/fla.tar.xz (the published wheels, installed
# with --no-deps); the recording is benchmarks/gpu/record_calls.sh, resuming from .s26/raw.
set -u
export T0=$(date +%s)
mkdir -p /tmp/lib && tar -xJf .s26/fla.tar.xz -C /tmp/lib || exit 1
RAW_FROM=.s26/raw ENGINE="$(git rev-parse HEAD 2>/dev/null)" exec bash benchmarks/gpu/record_calls.sh "$@"
