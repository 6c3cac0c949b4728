#!/bin/bash
# On the device machine, from the repository root (session 28's recordings of four FlagGems 5.0.2
# kernels through their public ops, as session 25's; the engine is this checkout's):
#   bash benchmarks/results/session28/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# Each step runs `abductune sweep --call library_calls:CALL --only KERNELS` with LIBRARY_CALLS_PICK=PICK
# (empty: every shape) under `timeout` so the whole ends inside DEADLINE_S. Record mode keeps every
# measured config, so a later call resumes from the partial files carried in .s28/raw. One fresh
# ABDUCTUNE_STORE per call, so no machine store answers from cache. FlagGems 5.0.2 and SQLAlchemy
# 2.1.9 come unpacked from .s27/fg.tar.xz: session 23's wheels as unpacked in .s23/lib.tar.xz,
# repacked without SQLAlchemy's optional compiled extensions (it runs as pure Python; FlagGems uses
# it for its config cache only) and without click, rich, markdown-it and mdurl (in the device image),
# as the tracked tree plus .s23 no longer fit the 64 MiB that travels. ptxas runs past 30 s are
# killed (the config fails as a compile error); the recording is benchmarks/gpu/record_calls.sh.
set -u
export T0=$(date +%s) ABDUCTUNE_PTXAS_TIMEOUT_S=30
mkdir -p /tmp/lib && tar -xJf .s27/fg.tar.xz -C /tmp/lib || exit 1
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | awk '{print $2}' | tr '\n' ' ')
RAW_FROM=.s28/raw ENGINE="$(git rev-parse HEAD 2>/dev/null)${dirty:+ with uncommitted changes to: $dirty}" \
  exec bash benchmarks/gpu/record_calls.sh "$@"
