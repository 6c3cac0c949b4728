#!/bin/bash
# Record library kernels through `abductune sweep --call` under one device call's deadline; the
# sessions' own scripts (benchmarks/results/session23/record.sh, session25/record.sh) set up the
# libraries and the engine first, then run this. On the device machine, from the repository root:
#   T0=<start> RAW_FROM=<dir> ENGINE=<label> bash benchmarks/gpu/record_calls.sh DEADLINE_S CALL:KERNELS:PICK ...
# Each step runs `abductune sweep --call library_calls:CALL --only KERNELS` with LIBRARY_CALLS_PICK=PICK
# (empty: every shape) under `timeout`, so the whole ends inside DEADLINE_S counted from T0 (default:
# now). Record mode keeps every measured config, so a call resumes from the partial files carried
# in RAW_FROM. One fresh ABDUCTUNE_STORE per call, so no machine store answers from cache. The
# libraries are expected unpacked under /tmp/lib; ENGINE is what the log's first line names.
set -u
T0=${T0:-$(date +%s)}; DEADLINE=$1; shift
LOG=$OUT/record.log
export PYTHONPATH=$PWD/src:$PWD/benchmarks/gpu:/tmp/lib PYTHONUNBUFFERED=1
export ABDUCTUNE_STORE=$(mktemp -d)/s.db
mkdir -p /tmp/raw && { [ -d "${RAW_FROM:-}" ] && cp -r "$RAW_FROM"/. /tmp/raw/ || true; }
{ echo "engine ${ENGINE:-unknown}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
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
