#!/bin/bash
# On the device machine, from the repository root (session 23's recordings):
#   bash benchmarks/results/session23/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# Each step runs `abductune sweep --call library_calls:CALL --only KERNELS` with LIBRARY_CALLS_PICK=PICK
# (empty: every shape) under `timeout` so the whole ends inside DEADLINE_S; record mode keeps every
# measured config, so the next call resumes from the carried partial files (.s23/raw). One fresh
# ABDUCTUNE_STORE for the call, so no machine store answers from cache. The engine is put back to
# the session's start (.s23/eng, prep_engine.sh) on this copy only. The recording itself is
# benchmarks/gpu/record_calls.sh (shared with session 25's script).
set -u
export T0=$(date +%s)
# the wheels (flag_gems 5.0.2, sqlalchemy, platformdirs, click, rich, markdown-it-py, mdurl) unpacked
# here and carried as one tar.xz (.s23/lib.tar.xz) after the first call, to fit the call's 64 MiB
# (the first call installed the same wheels from .s23/whl; the second, with them, was refused as
# too large: `for w in .s23/whl/*.whl; do unzip -q -o $w -d LIB; done; tar -cJf .s23/lib.tar.xz -C LIB .`)
if [ -f .s23/lib.tar.xz ]; then mkdir -p /tmp/lib && tar -xJf .s23/lib.tar.xz -C /tmp/lib || exit 1
else python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/lib .s23/whl/*.whl || exit 1; fi
(cd .s23/eng && find src -type f) | while read -r f; do cp ".s23/eng/$f" "$f"; done
while read -r f; do [ -n "$f" ] && rm -f "$f"; done < .s23/eng/DELETE
RAW_FROM=.s23/raw ENGINE="$(cat .s23/eng/ENGINE)" exec bash benchmarks/gpu/record_calls.sh "$@"
