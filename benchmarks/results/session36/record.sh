#!/bin/bash
# On the device machine, from the repository root (session 36's recordings of two fresh
# flash-linear-attention kernels, its matmul and its short-row layer norm, through their public ops
# under patch_triton; the engine is this checkout's):
#   bash benchmarks/results/session36/record.sh DEADLINE_S CALL:KERNEL:PICK ...
# Session 31's script with partial files carried in .s36/raw (carry: [".whl_fg", ".s36"]).
RAW_DIR=.s36/raw exec bash benchmarks/results/session31/record.sh "$@"
