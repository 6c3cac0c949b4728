#!/bin/bash
# On the device machine, from the repository root (session 25's recordings, at the session's
# start commit: no engine change had been made yet):
#   bash benchmarks/results/session25/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# Each step runs `abductune sweep --call library_calls:CALL --only KERNELS` with LIBRARY_CALLS_PICK=PICK
# (empty: every shape) under `timeout` so the whole ends inside DEADLINE_S. Record mode keeps every
# measured config, so a later call resumes from the partial files carried in .s25/raw. One fresh
# ABDUCTUNE_STORE per call, so no machine store answers from cache. FlagGems 5.0.2 and its
# dependencies come unpacked from .s23/lib.tar.xz (session 23's wheels); the recording itself is
# benchmarks/gpu/record_calls.sh, shared with session 23's script.
set -u
export T0=$(date +%s)
mkdir -p /tmp/lib && tar -xJf .s23/lib.tar.xz -C /tmp/lib || exit 1
RAW_FROM=.s25/raw ENGINE="$(git rev-parse HEAD 2>/dev/null)" exec bash benchmarks/gpu/record_calls.sh "$@"
