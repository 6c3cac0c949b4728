#!/bin/bash
# On the device machine, from the repository root (session 23's recordings):
#   bash benchmarks/results/session23/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# Each step runs `abductune sweep --call library_calls:CALL --only KERNELS` with LIBRARY_CALLS_PICK=PICK
# (empty: every shape) under `timeout` so the whole ends inside DEADLINE_S; record mode keeps every
# measured config, so the next call resumes from the carried partial files (.s23/raw). One fresh
# ABDUCTUNE_STORE for the call, so no machine store answers from cache. The engine is put back to
# the session's start (.s23/eng, prep_engine.sh) on this copy only.
set -u
T0=$(date +%s); DEADLINE=$1; shift
LOG=$OUT/record.log
# the wheels (flag_gems 5.0.2, sqlalchemy, platformdirs, click, rich, markdown-it-py, mdurl) unpacked
# here and carried as one tar.xz (.s23/lib.tar.xz) after the first call, to fit the call's 64 MiB
# (the first call installed the same wheels from .s23/whl; the second, with them, was refused as
# too large: `for w in .s23/whl/*.whl; do unzip -q -o $w -d LIB; done; tar -cJf .s23/lib.tar.xz -C LIB .`)
if [ -f .s23/lib.tar.xz ]; then mkdir -p /tmp/lib && tar -xJf .s23/lib.tar.xz -C /tmp/lib || exit 1
else python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/lib .s23/whl/*.whl || exit 1; fi
(cd .s23/eng && find src -type f) | while read -r f; do cp ".s23/eng/$f" "$f"; done
while read -r f; do [ -n "$f" ] && rm -f "$f"; done < .s23/eng/DELETE
export PYTHONPATH=$PWD/src:$PWD/benchmarks/gpu:/tmp/lib PYTHONUNBUFFERED=1
export ABDUCTUNE_STORE=$(mktemp -d)/s.db
mkdir -p /tmp/raw && cp -r .s23/raw/. /tmp/raw/
{ echo "engine $(cat .s23/eng/ENGINE)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"; } 2>&1 | tee -a "$LOG"
for step in "$@"; do
  IFS=: read -r call only pick <<< "$step"
  left=$(( DEADLINE - ($(date +%s) - T0) - 20 ))
  if [ "$left" -lt 40 ]; then echo "== $step: skipped, ${left}s left" | tee -a "$LOG"; continue; fi
  echo "== $step ($left s left): LIBRARY_CALLS_PICK=$pick python3 -m abductune sweep --call library_calls:$call --only $only --out /tmp/raw" | tee -a "$LOG"
  LIBRARY_CALLS_PICK=$pick timeout -k 15 -s TERM "$left" python3 -m abductune sweep --call "library_calls:$call" \
    --only "$only" --out /tmp/raw >> "$LOG" 2>&1
  echo "== $step: exit $? at $(( $(date +%s) - T0 ))s" | tee -a "$LOG"
done
tar -czf "$OUT/raw.tgz" -C /tmp raw
echo "== files"
for f in $(find /tmp/raw -name '*.jsonl*' | sort); do
  n=$( (case $f in *.gz) zcat "$f";; *) cat "$f";; esac) | tail -n +2 | wc -l)
  bad=$( (case $f in *.gz) zcat "$f";; *) cat "$f";; esac) | tail -n +2 | grep -vc '"status":"ok"')
  echo "${f#/tmp/raw/} records $n not-ok $bad"
done
grep -E "done,|Error|error:|AssertionError|Traceback" "$LOG" | tail -20
