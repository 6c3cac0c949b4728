"""The kernel zoo: kernels the tuner was not built around, written in other styles.

The built-in suite (`abductune.kernels`) is what the theories, thresholds and heuristics were
developed on. The zoo is what they are judged on: other parameter names, other tilings, other
masks, dtypes and fusions, so that leave-one-kernel-out figures mean something. Each entry is a
`KernelSpec` written from the published algorithm, in our own words; third-party kernels are
recorded through their libraries' public APIs instead and have no entry here.

Zoo kernels are not part of `abductune kernels` (the built-in suite); `kernels.get(name)` finds
them by their zoo name, so `abductune sweep --kernel zoo_mm_persistent_fp16` records one.
"""
from __future__ import annotations

# zoo name -> (module in this package, KernelSpec subclass taking no arguments)
REGISTRY: dict[str, tuple[str, str]] = {
    # matmul in other styles
    "zoo_mm_tutorial_bf16": ("mm_tutorial", "TutorialMatmulBf16"),
    "zoo_mm_persistent_fp16": ("mm_persistent", "PersistentMatmulFp16"),
    "zoo_mm_splitk_fp16": ("mm_splitk", "SplitKMatmulFp16"),
    "zoo_mm_fp8": ("mm_fp8", "Fp8Matmul"),
    # quantized and grouped
    "zoo_mm_int8": ("mm_int8", "Int8Matmul"),
    "zoo_mm_w4a16": ("mm_w4a16", "W4A16Matmul"),
    "zoo_mm_mxfp4": ("mm_mxfp4", "MxFp4Matmul"),
    "zoo_mm_bf16_int16": ("mm_int16", "Bf16Int16Matmul"),
    "zoo_moe_gemm_bf16": ("moe_gemm", "MoeGemmBf16"),
    # attention and position
    "zoo_attn_fwd_bf16": ("attention", "AttentionFwdBf16"),
    "zoo_attn_causal_fwd_bf16": ("attention", "CausalAttentionFwdBf16"),
    "zoo_rope_bf16": ("rope", "RopeBf16"),
    # rows and elementwise
    "zoo_cross_entropy_bf16": ("cross_entropy", "CrossEntropyBf16"),
    "zoo_softmax_online_fp16": ("softmax_online", "OnlineSoftmaxFp16"),
    "zoo_layernorm_fwd_bf16": ("layernorm", "LayerNormFwdBf16"),
    "zoo_layernorm_bwd_bf16": ("layernorm", "LayerNormBwdBf16"),
    "zoo_swiglu_bf16": ("swiglu", "SwigluBf16"),
    "zoo_rmsnorm_bf16": ("rmsnorm", "RMSNormBf16"),
}


def names() -> list[str]:
    return list(REGISTRY)


def load(name: str):
    """A fresh instance of the zoo kernel `name` (the caller caches it)."""
    import importlib

    module, cls = REGISTRY[name]
    spec = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
    spec.name = name
    return spec
