#!/bin/bash
# On the device machine, from the repository root (session 31's recordings of three fresh FlagGems
# 5.0.2 kernels through their public ops, as session 28's; the engine is this checkout's):
#   bash benchmarks/results/session31/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# Each step runs `abductune sweep --call library_calls:CALL --only KERNELS` with LIBRARY_CALLS_PICK=PICK
# (empty: every shape) under `timeout` so the whole ends inside DEADLINE_S. Record mode keeps every
# measured config, so a later call resumes from the partial files carried in .s31/raw. One fresh
# ABDUCTUNE_STORE per call, so no machine store answers from cache. FlagGems 5.0.2 and its
# dependencies (SQLAlchemy 2.1.9, pure Python; einops, platformdirs) are installed from the wheels in
# .whl_fg/ (an ignored folder: the device call carries it) into /tmp/lib, without an index or
# dependency resolution. RAW_DIR (default .s31/raw) names the folder a call resumes from. ptxas
# runs past 30 s are killed (the config fails as a compile error); the
# recording is benchmarks/gpu/record_calls.sh.
set -u
export T0=$(date +%s) ABDUCTUNE_PTXAS_TIMEOUT_S=30
mkdir -p /tmp/lib && python3 -m pip install -q --no-index --no-deps --target /tmp/lib .whl_fg/*.whl || exit 1
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | awk '{print $2}' | tr '\n' ' ')
RAW_FROM=${RAW_DIR:-.s31/raw} ENGINE="$(git rev-parse HEAD 2>/dev/null)${dirty:+ with uncommitted changes to: $dirty}" \
  exec bash benchmarks/gpu/record_calls.sh "$@"
