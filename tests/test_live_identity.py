"""What `patch_triton` infers live about a library kernel is what its recording's header says:
the raw recordings under benchmarks/results/session*/raw keep the Problem as `sweep --call`
inferred it on the GPU (the kernel's own name, its key's dims, its tensors' dtypes); the zoo
datasets built from them carry a completed header, which the replays read. A kernel read as
another class live is seeded and searched by other rules than its replay says (session 28: the
softmax backward over a middle dim, keyed by M, N and K, was tuned live as a matmul and left 16%
on the table that its replay found)."""
from __future__ import annotations

from pathlib import Path

import pytest

from abductune.classify import classify
from abductune.datasets.format import iter_lines, read_dataset
from abductune.datasets.zoo import zoo_kernels
from abductune.errors import DatasetError
from abductune.problem import Problem

ROOT = Path(__file__).resolve().parents[1]
# headers that restate the product a kernel computes, which no live key says: FlagGems' implicit-GEMM
# conv2d is keyed by the convolution's sizes and recorded as the matmul M x N x K it runs
RESTATED = {"conv2d_forward_kernel"}


def _header(path: Path) -> dict:
    """A dataset file's first line (its header), not its records."""
    return next(iter_lines(path))[1]


def _raw_kernels() -> dict[str, tuple[Path, dict]]:
    """One raw recording per kernel source (its hash), the first found, with its header."""
    out: dict[str, tuple[Path, dict]] = {}
    for p in sorted(ROOT.glob("benchmarks/results/session*/raw/**/*.jsonl*")):
        try:
            h = _header(p)
        except (DatasetError, StopIteration):
            continue
        sh = h.get("problem", {}).get("source_hash")
        if sh and sh not in out:
            out[sh] = (p, h)
    return out


def _zoo_classes() -> dict[str, str]:
    problems = [_header(paths[0])["problem"] for paths in zoo_kernels().values()]
    return {pr["source_hash"]: pr["kernel_class"] for pr in problems}


def test_each_recorded_library_kernel_gets_its_headers_class_live():
    raw, zoo = _raw_kernels(), _zoo_classes()
    checked = []
    for sh, (path, h) in raw.items():
        if sh not in zoo:
            continue  # a kernel recorded but not (or not yet) in the zoo
        pr = h["problem"]
        if pr["kernel"] in RESTATED:
            continue
        live = Problem(pr["kernel"], "other", pr["dims"], pr.get("dtypes", {}))
        got = classify(live, read_dataset(path).space()).kernel_class
        assert got == zoo[sh], f"{pr['kernel']} ({path.relative_to(ROOT)}): live {got}, header {zoo[sh]}"
        checked.append(pr["kernel"])
    if len(checked) < 20:
        pytest.fail(f"only {len(checked)} raw recordings matched zoo kernels: {checked}")
