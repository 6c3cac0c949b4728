"""benchmarks/library_headers.py: a sampled recording that ran out of device time keeps its
sample as the replay's space, the configs never recorded stated as timeouts saying why (session
25's FlagGems max pool), and a finished one is left as it is."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import library_headers as lh  # noqa: E402

from abductune.datasets.format import Dataset  # noqa: E402
from abductune.measurement import Measurement  # noqa: E402
from abductune.problem import Problem  # noqa: E402
from abductune.space import Choice, Space  # noqa: E402
from abductune.sweep import sample_configs  # noqa: E402


def _sampled(keep: int) -> tuple[Dataset, list[dict]]:
    space = Space([Choice("BLOCK_H", [4, 8, 16, 32, 64, 128], role="tile:H"),
                   Choice("BLOCK_W", [4, 8, 16, 32, 64, 128], role="tile:W"),
                   Choice("num_warps", [1, 2, 4, 8, 16], role="warps")], name="pool")
    listed = [{"BLOCK_H": 16, "BLOCK_W": 16, "num_warps": 4}]
    want, meta = sample_configs(space, listed, size=20, seed=0, exhaustive_max=0)
    records = [Measurement(c, "ok", time_ms=1.0 + i) for i, c in enumerate(want[:keep])]
    ds = Dataset(Problem("pool", "other", {"out_h": 28}, {}), space.to_dict(), records,
                 restricted_to_records=True, meta={"fixed_configs": listed, "sample": meta})
    return ds, want


def _headed(tmp_path, monkeypatch, ds: Dataset, out_kernel: str) -> Dataset:
    """`library_headers.main` run on `ds` as the one raw recording of its kernel; the dataset it wrote."""
    from abductune.datasets.format import read_dataset, write_dataset

    raw = tmp_path / "raw" / ds.problem.kernel
    raw.mkdir(parents=True)
    write_dataset(ds, raw / "shape.jsonl.gz")
    monkeypatch.setattr(sys, "argv", ["library_headers.py", str(tmp_path / "raw"), str(tmp_path / "out")])
    lh.main()
    return read_dataset(next((tmp_path / "out" / out_kernel).glob("*.jsonl.gz")))


def test_the_sample_configs_without_a_record_are_found_in_the_samples_order():
    ds, want = _sampled(keep=15)
    assert len(want) >= 20 and {"BLOCK_H": 16, "BLOCK_W": 16, "num_warps": 4} in want  # 20 drawn, the list's
    assert lh._unsampled(ds) == [dict(c) for c in want[15:]]
    finished, _ = _sampled(keep=len(want))
    assert lh._unsampled(finished) == []


def test_a_run_out_recording_gets_its_header_and_timeouts_for_the_rest(tmp_path, monkeypatch):
    ds, want = _sampled(keep=15)
    dims = {"out_h": 14, "out_w": 14, "kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2}
    ds = Dataset(Problem("max_pool2d_forward_kernel", "other", dims, {"input_ptr": "bf16"}), ds.space_dict,
                 ds.records, restricted_to_records=True, meta=ds.meta)
    out = _headed(tmp_path, monkeypatch, ds, "flaggems_max_pool2d_bf16")
    assert out.problem.dims["batch"] == 16 and out.problem.dims["channels"] == 512 and out.problem.flops > 0
    late = [m for m in out.records if m.status == "timeout"]
    assert len(late) == len(want) - 15 == out.meta["unfinished_compiles"]
    assert all(m.error == lh.UNFINISHED for m in late) and out.meta["call"]["padding"] == 0


def test_a_cross_entropy_recording_gets_its_rows_and_its_class_tile_restated(tmp_path, monkeypatch):
    """Session 31's FlagGems cross entropy: keyed by (C, D) alone, so the rows come from the call's
    shapes; BLOCK_C, read as a tile of a dim "C", is restated as the reduction tile of the cols."""
    space = Space([Choice("BLOCK_C", [256, 512], role="tile:C"), Choice("BLOCK_D", [1, 4], role="tile:D"),
                   Choice("num_warps", [4, 8], role="warps")], name="celoss")
    records = [Measurement(c, "ok", time_ms=1.0 + i) for i, c in enumerate(space.valid_configs())]
    ds = Dataset(Problem("celoss_indices_kernel", "other", {"C": 150, "D": 512 * 512}, {"inp_ptr": "bf16"}),
                 space.to_dict(), records, meta={"fixed_configs": [records[0].config]})
    out = _headed(tmp_path, monkeypatch, ds, "flaggems_cross_entropy_bf16")
    assert out.problem.kernel_class == "row_reduction" and out.problem.dims == {"rows": 4, "cols": 150, "D": 262144}
    assert out.problem.flops > 0 and out.problem.min_bytes >= 2.0 * 4 * 150 * 262144
    assert {p["name"]: p["role"] for p in out.space_dict["params"]}["BLOCK_C"] == "tile:R"
    assert out.meta["call"]["logits"] == [4, 150, 512, 512] and len(out.records) == len(records)
    assert out.meta["origin"].startswith("FlagGems 5.0.2 (Apache-2.0)")


def test_conv3d_and_antialiased_bicubic_headers_take_the_call_from_their_shapes():
    """Session 31's conv3d (an implicit GEMM: M, N, K, the call's geometry found again from them)
    and anti-aliased bicubic downsampling (the input size from the key (N, C, OH, OW), and the
    taps a side the kernel loops over: 2 x int(2 x scale + 0.5) + 1)."""
    dims = dict(in_n=4096, weight_c=3, input_depth=2, input_height=14, input_width=14, out_c=1280, out_depth=1,
                out_height=1, out_width=1, weight_depth=2, weight_height=14, weight_width=14, stride_depth=2,
                stride_height=14, stride_width=14, padding_depth=0, padding_height=0, padding_width=0, groups=1)
    name, p = lh._fg_conv3d(Problem("conv3d_forward_kernel", "other", dims, {"input_pointer": "bf16"}))
    assert name == "flaggems_conv3d_bf16" and p.dims == {"M": 4096, "N": 1280, "K": 1176}
    assert lh.CALLS["conv3d_forward_kernel"](p.dims)["stride"] == [2, 14, 14]
    name, p = lh._fg_bicubic_aa(Problem("general_interpolate_bicubic2d_aa_kernel", "other",
                                        {"N": 16, "C": 3, "OH": 224, "OW": 224}, {"ptr_i": "bf16"}))
    assert name == "flaggems_upsample_bicubic2d_aa_bf16" and p.kernel_class == "other"
    assert (p.dims["in_h"], p.dims["taps_h"], p.dims["taps_w"]) == (512, 11, 11)  # scale 512 / 224: support 4.57
    assert lh._aa_taps(720, 360) == 9 and lh._aa_taps(256, 224) == 5


FP8_DTYPES = {"c_ptr": "bf16", "a_ptr": "float8_e4m3fn", "b_ptr": "float8_e4m3fn", "a_scale_ptr": "fp32",
              "b_scale_ptr": "fp32"}  # the per-token kernel's pointers in its signature's order, as recorded


def test_scaled_mm_headers_take_m_from_the_shapes_and_stay_fp8_matmuls():
    """Session 32's FlagGems fp8 scaled matmuls, keyed by (_M_NPO2, N, K): M from the call's shapes
    (each a power of two, so every shape has its own key), filed as the fp8 x fp8 matmul
    abductune's classifier reads them as live, the operands' fp8 first (the compute peak)."""
    from abductune.classify import classify

    for shapes, table in ((lh.FLAGGEMS_SCALED_MM_FP8, lh.SCALED_MM),
                          (lh.FLAGGEMS_SCALED_MM_BLOCKWISE_FP8, lh.SCALED_MM_BLOCKWISE)):
        assert len(table) == len(shapes) and all(key[0] == m for key, m in table.items())
    assert all(n % 128 == 0 and k % 128 == 0 for _, n, k in lh.FLAGGEMS_SCALED_MM_BLOCKWISE_FP8)
    name, p = lh._fg_scaled_mm(Problem("_pertensor_or_pertoken_smm_kernel", "matmul",
                                       {"_M_NPO2": 16, "N": 28672, "K": 8192}, dict(FP8_DTYPES)), False)
    assert name == "flaggems_scaled_mm_fp8" and p.dims == {"M": 16, "N": 28672, "K": 8192}
    assert p.flops == 2.0 * 16 * 28672 * 8192 and p.min_bytes == 16 * 8192 + 8192 * 28672 + 4.0 * (16 + 28672) \
        + 2.0 * 16 * 28672
    assert list(p.dtypes)[:2] == ["a_ptr", "b_ptr"] and p.dtypes == FP8_DTYPES
    cls = classify(p)
    assert (cls.kernel_class, cls.dtype_family) == ("matmul", "fp8")
    name, p = lh._fg_scaled_mm(Problem("_block_wise_smm_kernel", "matmul", {"_M_NPO2": 2048, "N": 8192, "K": 28672},
                                       dict(FP8_DTYPES)), True)
    assert name == "flaggems_scaled_mm_blockwise_fp8" and p.dims == {"M": 2048, "N": 8192, "K": 28672}
    assert p.min_bytes == 2048 * 28672 + 28672 * 8192 + 4.0 * (2048 * 224 + 224 * 64) + 2.0 * 2048 * 8192
    assert lh.CALLS["_block_wise_smm_kernel"](p.dims)["scale_block"] == [128, 128]
    assert lh.CALLS["_pertensor_or_pertoken_smm_kernel"](p.dims)["bias"] is None


def test_a_block_wise_scaled_mm_recording_keeps_its_wrong_tile_k_and_restates_its_grouping(tmp_path, monkeypatch):
    """The block-wise kernel scales each K tile by the scales of its first 128-block: the grown
    space's TILE_K of 256 runs fast and wrong, and the recording's list check marks it
    `wrong_result` itself (session 33, on the H200: all 52 such configs that ran, on each of three
    shapes); the header keeps every status as recorded. abductune reads TILE_M / TILE_N / TILE_K
    as tiles and the warps and stages; SWIZZLE_GROUP_M it does not read, so the header restates
    it as the grouping."""
    space = Space([Choice("TILE_M", [16, 32, 64]), Choice("TILE_N", [32, 64]), Choice("TILE_K", [64, 128, 256]),
                   Choice("SWIZZLE_GROUP_M", [8]), Choice("num_warps", [2, 4]), Choice("num_stages", [3, 4])],
                  name="blockwise")
    assert space.roles() == {"tile:M": "TILE_M", "tile:N": "TILE_N", "tile:K": "TILE_K", "warps": "num_warps",
                             "stages": "num_stages"}
    why = "beyond the list, its outputs differ from the kernel's own config"

    def recorded(i, c):
        if c["TILE_K"] == 256:
            return Measurement(c, "pruned", error="too big") if c["TILE_M"] == 64 else \
                Measurement(c, "wrong_result", error=why)
        return Measurement(c, "ok", time_ms=1.0 + i)
    records = [recorded(i, c) for i, c in enumerate(space.valid_configs())]
    listed = [c for c in space.valid_configs() if c["TILE_K"] == 128][:2]
    ds = Dataset(Problem("_block_wise_smm_kernel", "matmul", {"_M_NPO2": 16, "N": 4096, "K": 4096},
                         dict(FP8_DTYPES)), space.to_dict(), records, meta={"fixed_configs": listed})
    out = _headed(tmp_path, monkeypatch, ds, "flaggems_scaled_mm_blockwise_fp8")
    assert out.problem.kernel_class == "matmul" and out.problem.dims == {"M": 16, "N": 4096, "K": 4096}
    by = {(m.config["TILE_M"], m.config["TILE_K"]): m.status for m in out.records}
    assert by[(16, 256)] == by[(32, 256)] == "wrong_result" and by[(64, 256)] == "pruned"
    assert by[(16, 64)] == by[(64, 128)] == "ok" and len(out.records) == len(records)
    assert [m.status for m in out.records] == [m.status for m in records]
    assert all(m.error == why for m in out.records if m.status == "wrong_result")
    assert {p["name"]: p["role"] for p in out.space_dict["params"]}["SWIZZLE_GROUP_M"] == "group"
    assert out.meta["origin"].startswith("FlagGems 5.0.2 (Apache-2.0)") and "cutlass_scaled_mm" in out.meta["origin"]


def test_as_reads_a_raw_folder_with_another_kernels_facts(tmp_path, monkeypatch):
    """Liger's int8 x int2 kernel and fla's bf16 matmul are both `matmul_kernel`: `--as
    matmul_kernel=fla:matmul_kernel` names the raw folder's library, so fla's recording keeps the
    dims and FLOPs record mode wrote and is filed as `fla_matmul_bf16` with fla's origin; without
    it the folder would get the int8 x int2 facts."""
    from abductune.datasets.format import read_dataset, write_dataset

    space = Space([Choice("BM", [64, 128], role="tile:M"), Choice("BN", [64, 128], role="tile:N"),
                   Choice("BK", [32, 64], role="tile:K"), Choice("num_warps", [4, 8], role="warps")], name="mm")
    dims = {"M": 2048, "N": 4096, "K": 4096}
    problem = Problem("matmul_kernel", "matmul", dims, {"a": "bf16", "b": "bf16", "c": "bf16"},
                      flops=2.0 * 2048 * 4096 * 4096, min_bytes=2.0 * (2048 * 4096 * 2 + 4096 * 4096))
    ds = Dataset(problem, space.to_dict(), [Measurement({"BM": 128, "BN": 128, "BK": 64, "num_warps": 8}, "ok",
                                                        time_ms=0.1)], meta={"origin": "fla.ops.utils.matmul.matmul_kernel"})
    raw = tmp_path / "raw" / "matmul_kernel"
    raw.mkdir(parents=True)
    write_dataset(ds, raw / "shape.jsonl.gz")
    monkeypatch.setattr(sys, "argv", ["library_headers.py", str(tmp_path / "raw"), str(tmp_path / "out"),
                                      "--as", "matmul_kernel=fla:matmul_kernel"])
    lh.main()
    out = read_dataset(tmp_path / "out" / "fla_matmul_bf16" / "M2048_N4096_K4096.jsonl.gz")
    assert out.problem.kernel == "fla_matmul_bf16" and out.problem.dims == dims
    assert out.problem.flops == problem.flops and out.problem.min_bytes == problem.min_bytes
    assert out.meta["origin"].startswith("flash-linear-attention (fla-core) 0.6.0 (MIT): fla.ops.utils.matmul")
    assert "fla.ops.utils.matmul.matmul under patch_triton" in out.meta["origin"]
