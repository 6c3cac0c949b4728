"""One rank of a torch.distributed job (gloo, on the test's TCPStore) running the tutorial matmul
under @abductune.autotune on a store file of its own, as on a machine of its own:
`python -m autotune_kernels.rank_child PORT RANK WORLD STORE TIMER WAIT_S SHAPES`; prints one
RESULT JSON line (per shape: how many timings this rank took, its winner and where it came from).

TIMER: "fixed" (the list's second config is fastest), "own" (times drawn from this process's pid,
0.2 s a timing, so ranks overlap and each would pick its own winner if they did not agree) or
"die:PATH" (as fixed, but the first process of the job to time anything exits there, before it
publishes a winner: PATH marks that one died). SHAPES: "M.N.K,M.N.K,...", called in that order."""
import collections
import datetime
import json
import os
import random
import sys
import time

import torch
import torch.distributed as dist

from autotune_kernels import matmul as mm

port, rank, world, store, mode, wait_s, shapes = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                                  sys.argv[4], sys.argv[5], float(sys.argv[6]), sys.argv[7])
rng = random.Random(os.getpid())
timed: collections.Counter = collections.Counter()
current = [""]


def timer(cfg, launch):
    timed[current[0]] += 1
    if mode.startswith("die:"):
        try:
            os.close(os.open(mode[4:], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            sys.stdout.flush()
            os._exit(7)  # the claimer dies mid-tune: nothing published, nothing cleaned up
        except FileExistsError:
            pass
    if mode == "own":
        time.sleep(0.2)
        return [rng.uniform(1.0, 2.0)]
    return [{16: 3.0, 32: 1.0}[cfg["BLOCK_SIZE_M"]] + (cfg["BLOCK_SIZE_N"] == 32)]


kv = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=60))
dist.init_process_group("gloo", store=kv, rank=rank, world_size=world)
k = mm.make(store=store, timer=timer, wait_timeout_s=wait_s)
out = {}
for shape in shapes.split(","):
    M, N, K = map(int, shape.split("."))
    current[0] = shape
    before = set(k.choices)
    a, b = torch.randn(M, K), torch.randn(K, N)
    ok = torch.allclose(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    [key] = set(k.choices) - before
    out[shape] = {"ok": bool(ok), "timed": timed[shape], "winner": k.choices[key].config,
                  "source": k.choices[key].source}
print("RESULT" + json.dumps({"rank": rank, "shapes": out, "stats": k.stats}), flush=True)
os._exit(0)  # no teardown of the process group: the others may still be tuning, or dead
