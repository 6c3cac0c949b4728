"""`abductune sweep --call`: a third-party `@triton.autotune` kernel, reached through
`patch_triton`, records the space grown one step beyond its own list's hull as datasets (issue 22, item 4).
Run on the CPU under Triton's interpreter, in a child process (the interpreter is chosen
before `import triton`)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[1] / "src"

LIBRARY = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2),
                              triton.Config({"BLOCK": 128}, num_warps=1)], key=["n"])
    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


    def add(x, y):  # the library's public op
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
        return out
''')

CALLER = textwrap.dedent('''
    import torch


    def run():
        import thirdparty  # imported here, under the patch, as a user's script would
        for n in (1000, 4096):
            x, y = torch.randn(n), torch.randn(n)
            assert torch.allclose(thirdparty.add(x, y), x + y)
''')


def _sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "ABDUCTUNE_STORE": str(tmp_path / "store.sqlite"),
           "PYTHONPATH": os.pathsep.join([str(SRC), str(tmp_path)])}
    return subprocess.run([sys.executable, "-m", "abductune", "sweep", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_sweep_call_records_a_third_party_autotune_kernel_through_patch_triton(tmp_path):
    (tmp_path / "thirdparty.py").write_text(LIBRARY)
    (tmp_path / "caller.py").write_text(CALLER)
    out = tmp_path / "out"
    r = _sweep(tmp_path, "--call", "caller:run", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    from abductune.datasets.format import read_dataset, require_exhaustive

    paths = sorted((out / "add_kernel").glob("*.jsonl.gz"))
    assert [p.name for p in paths] == ["n1000.jsonl.gz", "n4096.jsonl.gz"]
    assert all(f"wrote {p}" in r.stdout for p in paths)
    for p in paths:
        ds = read_dataset(p, strict=True)
        space = ds.stated_space()
        assert len(ds.records) == len(space.valid_configs()) > 3  # the hull, not just the list
        # grown one step beyond the hull (what a budgeted search measures): BLOCK 16..256, warps to 4
        blocks = {m.config["BLOCK"] for m in ds.records}
        assert blocks == {16, 32, 64, 128, 256} and 4 in {m.config["num_warps"] for m in ds.records}
        assert "grown one step" in ds.meta["space_from"]
        assert require_exhaustive(ds).trusted()
        assert all(m.ok and m.time_ms > 0 for m in ds.records)
        assert len(ds.meta["fixed_configs"]) == 3 and all(space.is_valid(c) for c in ds.meta["fixed_configs"])
        assert "thirdparty.add_kernel" in ds.meta["origin"] and "patch_triton" in ds.meta["origin"]
        assert ds.problem.dims == {"n": int(p.name[1:].split(".")[0])}
        assert ds.problem.dtypes["x"] == "fp32"
        assert ds.problem.kernel_class == "elementwise"  # a known class: its FLOPs and bytes are filled in
        n = ds.problem.dims["n"]
        assert (ds.problem.flops, ds.problem.min_bytes) == (n, 12 * n)  # x, y, out in fp32


def test_a_second_sweep_with_the_same_store_records_again(tmp_path):
    """Record mode measures every key: with the store of an earlier sweep (the same
    $ABDUCTUNE_STORE) a second one used to find each key tuned, write nothing and say that no
    kernel was tuned (seen on the H100, session 18)."""
    (tmp_path / "thirdparty.py").write_text(LIBRARY)
    (tmp_path / "caller.py").write_text(CALLER)
    first = _sweep(tmp_path, "--call", "caller:run", "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stdout + first.stderr
    again = _sweep(tmp_path, "--call", "caller:run", "--out", str(tmp_path / "b"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(p.name for p in (tmp_path / "b" / "add_kernel").glob("*.jsonl.gz")) == ["n1000.jsonl.gz",
                                                                                         "n4096.jsonl.gz"]


def test_sweep_needs_one_of_kernel_or_call_and_a_call_that_tunes_nothing_says_so(tmp_path):
    r = _sweep(tmp_path, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "one of --kernel" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "idle.py").write_text("def run():\n    pass\n")
    r = _sweep(tmp_path, "--call", "idle:run", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no @triton.autotune kernel was tuned" in r.stderr
    r = _sweep(tmp_path, "--call", "nosuchmodule:run", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--call 'nosuchmodule:run'" in r.stderr


LIBRARY_TWO = LIBRARY + textwrap.dedent('''

    @triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=1)],
                     key=["n"])
    @triton.jit
    def scale_kernel(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) * 2.0, mask=m)


    def scale(x):
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        return out
''')

CALLER_TWO = textwrap.dedent('''
    import torch


    def run():
        import thirdparty
        x, y = torch.randn(1000), torch.randn(1000)
        assert torch.allclose(thirdparty.add(x, y), x + y)
        assert torch.allclose(thirdparty.scale(x), 2 * x)
''')


def test_sweep_call_only_records_the_named_kernels_and_the_others_still_run(tmp_path):
    (tmp_path / "thirdparty.py").write_text(LIBRARY_TWO)
    (tmp_path / "caller.py").write_text(CALLER_TWO)
    out = tmp_path / "out"
    r = _sweep(tmp_path, "--call", "caller:run", "--out", str(out), "--only", "scale_kernel")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["scale_kernel"]  # add_kernel tuned its list, unrecorded
    assert [p.name for p in (out / "scale_kernel").glob("*.jsonl.gz")] == ["n1000.jsonl.gz"]
    r = _sweep(tmp_path, "--call", "caller:run", "--out", str(tmp_path / "o2"), "--only", "nosuch")
    assert r.returncode == 2 and "no kernel named nosuch was tuned" in r.stderr
    assert "add_kernel" in r.stderr and "scale_kernel" in r.stderr  # what it did reach
    r = _sweep(tmp_path, "--kernel", "matmul", "--out", str(tmp_path / "o3"), "--only", "x")
    assert r.returncode == 2 and "--only goes with --call" in r.stderr


def test_one_shape_called_in_two_dtypes_records_two_files_and_a_rerun_keeps_both(tmp_path):
    # record mode named a file by shape alone: the second dtype's dataset overwrote the first's
    (tmp_path / "thirdparty.py").write_text(LIBRARY)
    (tmp_path / "caller.py").write_text(textwrap.dedent('''
        import torch


        def run():
            import thirdparty
            for dt in (torch.float32, torch.float16):
                x, y = torch.randn(1000).to(dt), torch.randn(1000).to(dt)
                assert torch.allclose(thirdparty.add(x, y).float(), (x + y).float(), atol=1e-2)
    '''))
    out = tmp_path / "out"
    from abductune.datasets.format import read_dataset

    for _ in range(2):  # the rerun finds each key's own file
        r = _sweep(tmp_path, "--call", "caller:run", "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        paths = sorted((out / "add_kernel").glob("*.jsonl.gz"))
        assert [p.name for p in paths] == ["n1000.jsonl.gz", "n1000_fp16.jsonl.gz"]
        dts = [set(read_dataset(p).problem.dtypes.values()) for p in paths]
        assert dts == [{"fp32"}, {"fp16"}]
    assert not list((out / "add_kernel").glob("*.other"))  # nothing moved aside
