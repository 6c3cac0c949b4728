"""Does a kernel timed right after the GPU idles read slower than in steady state? (session 34)"""
import subprocess, time
import torch
from triton.testing import do_bench
from torch._inductor.runtime.benchmarking import benchmarker

def clk():
    return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,pstate", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()

x = torch.randn(4096, 3072, device="cuda", dtype=torch.bfloat16)
f = lambda: torch.nn.functional.gelu(x)
f(); torch.cuda.synchronize()
time.sleep(3.0)
print("idle", clk())
for i in range(3):
    print(f"inductor benchmark_gpu, after idle, try {i}: {benchmarker.benchmark_gpu(f) * 1e3:.1f} us  clock {clk()}")
for i in range(3):
    print(f"do_bench(warmup=1, rep=5) try {i}: {do_bench(f, warmup=1, rep=5) * 1e3:.1f} us  clock {clk()}")
t0 = time.time()
while time.time() - t0 < 2.0:
    f()
torch.cuda.synchronize()
print("after 2 s of load", clk())
for i in range(3):
    print(f"inductor benchmark_gpu, loaded, try {i}: {benchmarker.benchmark_gpu(f) * 1e3:.1f} us  clock {clk()}")
for i in range(3):
    print(f"do_bench(warmup=25, rep=100) try {i}: {do_bench(f) * 1e3:.1f} us")
time.sleep(3.0)
print("idle again 3 s", clk())
print(f"inductor benchmark_gpu after idle: {benchmarker.benchmark_gpu(f) * 1e3:.1f} us  clock {clk()}")
ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
ev[0].record(); [f() for _ in range(200)]; ev[1].record(); torch.cuda.synchronize()
print(f"200 back-to-back launches: {ev[0].elapsed_time(ev[1]) / 200 * 1e3:.1f} us each")
