"""`patch_triton` on a GPU (issue 24): what the CPU tests cannot show.

- compile workers compile real kernels of the libraries' shapes (heuristics over autotune,
  keyword tensors with do_not_specialize, tensor descriptors whose block shape a config pre_hook
  sets) without falling back to the caller, and the store files them under the GPU, with dtypes;
- a torch.compile'd function calling a patched kernel tunes per key (pytorch#164124: Inductor
  once dropped a user autotuner's key): with backend="eager" the captured kernel is abductune's
  and tunes each key; with Inductor (dynamic shapes) every size gives the right result;
- the reach over whichever of Liger-Kernel, fla and FlagGems is installed: every autotuner their
  modules build becomes abductune's, none is left alone (the figures for docs/PERFORMANCE.md).

Run on a GPU machine: pytest -m gpu tests/gpu/test_patch_libraries_gpu.py -s"""
from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: autotune_kernels, for the workers too

import triton  # noqa: E402

import abductune  # noqa: E402
from abductune.store import Store  # noqa: E402


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    store = tmp_path_factory.mktemp("patch") / "s.sqlite"
    sys.modules.pop("autotune_kernels.libraries", None)
    with abductune.patch_triton(store=store, compile="parallel") as patch:
        mod = importlib.import_module("autotune_kernels.libraries")
    mod.STORE, mod.PATCH = store, patch
    yield mod
    sys.modules.pop("autotune_kernels.libraries", None)


def test_compile_workers_compile_the_libraries_kernels(lib, caplog):
    with caplog.at_level(logging.WARNING, logger="abductune.autotune"):
        x, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
        torch.testing.assert_close(lib.heur_scale(x, 2.0, b), 2 * x + b)
        xs, ys = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(
            64, 4096, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(lib.swiglu(xs, ys), torch.nn.functional.silu(xs) * ys, atol=2e-2, rtol=2e-2)
        xd = torch.randn(4096, 32, device="cuda")
        torch.testing.assert_close(lib.desc_scale(xd), 2 * xd)
        torch.testing.assert_close(lib.entry_scale(x, 3.0), 3 * x)
    failed = [r.getMessage() for r in caplog.records if "compile workers cannot" in r.getMessage()]
    assert not failed, failed
    for k in (lib.heur_scale_kernel.fn, lib.swiglu_kernel, lib.desc_scale_kernel):
        assert k._compile_plan()[0] == "parallel", (k.name, k._compile_plan())
    with Store(lib.STORE) as s:
        runs = {r.context.kernel: r.context for r in s.runs()}
    assert not any(c.hardware == "cpu-interpreter" for c in runs.values())
    assert runs["desc_scale_kernel"].dtypes == {"in_desc": "fp32", "out_desc": "fp32"}


def test_torch_compile_around_a_patched_kernel_tunes_per_key(lib):
    k = lib.swiglu_kernel  # a direct autotuner (Dynamo captures Autotuner and JIT objects), keyed by D
    before = k.stats["tunes"] + k.stats["store_hits"]
    eager = torch.compile(lib.swiglu, backend="eager")

    def check(fn, rows, d):
        x, y = torch.randn(rows, d, device="cuda"), torch.randn(rows, d, device="cuda")
        torch.testing.assert_close(fn(x, y), torch.nn.functional.silu(x) * y, atol=1e-5, rtol=1e-5)
    for d in (256, 1024, 256):
        check(eager, 8, d)
    assert k.stats["tunes"] + k.stats["store_hits"] - before == 2  # two keys, each decided once
    inductor = torch.compile(lib.swiglu, dynamic=True)
    for rows, d in ((8, 256), (8, 1024), (33, 4096)):
        check(inductor, rows, d)


LIBRARIES = {"liger_kernel": "liger_kernel.ops", "fla": "fla", "flag_gems": "flag_gems"}


@pytest.mark.parametrize("package", sorted(LIBRARIES))
def test_reach_over_an_installed_library(package, tmp_path, capsys):
    pytest.importorskip(package)
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    root = LIBRARIES[package]
    with abductune.patch_triton(store=tmp_path / "s.sqlite") as patch:
        top = importlib.import_module(root)
        errors = []
        for info in pkgutil.walk_packages(getattr(top, "__path__", []), prefix=root + "."):
            try:
                importlib.import_module(info.name)
            except Exception as e:  # noqa: BLE001 - a module that needs another optional package
                errors.append(f"{info.name}: {type(e).__name__}")
    text = patch.report()
    print(f"\n{package}: {text}\n(modules that did not import: {len(errors)})")
    outside = [ln for ln in text.splitlines() if "built outside the patch" in ln and package in ln]
    assert patch.autotuners and not outside
    assert all("nothing to tune" in why for _, why in patch.left_alone), patch.left_alone
    assert all(isinstance(t, triton.runtime.Autotuner) for t in patch.autotuners)
