"""A second process running the tutorial matmul under @abductune.autotune on a shared store:
`python -m autotune_kernels.child STORE M N K TIMER`; prints one JSON line (stats, winner).

TIMER: "fixed" (the list's second config is fastest) or "own" (times drawn from this process's
pid, sleeping 0.3 s per config so that two processes overlap: each would pick its own winner
if they did not agree through the store)."""
import json
import os
import random
import sys
import time

import torch

from autotune_kernels import matmul as mm

store, M, N, K, mode = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
rng = random.Random(os.getpid())


def timer(cfg, launch):
    if mode == "own":
        time.sleep(0.3)
        return [rng.uniform(1.0, 2.0)]
    return [{16: 3.0, 32: 1.0}[cfg["BLOCK_SIZE_M"]] + (cfg["BLOCK_SIZE_N"] == 32)]


k = mm.make(store=store, timer=timer)
a, b = torch.randn(M, K), torch.randn(K, N)
ok = torch.allclose(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
[choice] = k.choices.values()
print("RESULT" + json.dumps({"ok": ok, "stats": k.stats, "winner": choice.config, "source": choice.source}))
