#!/bin/bash
# On the device machine, from the repository root (session 33's recordings of FlagGems' two fp8
# scaled matmuls through flag_gems.cutlass_scaled_mm; the engine is this checkout's):
#   bash benchmarks/results/session33/record.sh DEADLINE_S CALL:KERNELS:PICK ...
# Session 31's script with the partial files carried in .s33/raw (carry: [".whl_fg", ".s33"]).
RAW_DIR=.s33/raw exec bash benchmarks/results/session31/record.sh "$@"
