"""The shapes `library_calls.py` records and the facts of each call that an autotuner's key
does not carry, in one torch-free table: `library_calls.py` calls the ops on them and
`benchmarks/library_headers.py` completes the recorded headers from them."""
from __future__ import annotations

DYT_ROWS = 4096  # every DyT row length is called on 4,096 rows
DYT_N = (1024, 2048, 4096, 5120, 8192, 14336)
INT8INT2_MNK = ((16, 4096, 4096), (128, 4096, 4096), (1000, 4096, 4096), (4096, 4096, 4096), (2048, 14336, 4096))
# fused MoE layers: (tokens, experts, hidden, intermediate, top-k)
MOE_LAYERS = ((2048, 8, 4096, 14336, 2), (4096, 60, 2048, 1408, 4), (4096, 64, 2048, 1024, 8),
              (1024, 8, 4096, 5120, 2), (4096, 128, 2048, 768, 8))
FLAGGEMS_MM_MNK = ((16, 4096, 4096), (256, 14336, 4096), (1000, 4096, 4096), (4096, 4096, 4096), (2048, 4096, 14336))
# fla's chunked GLA forward: (batch, tokens, heads, key dim, value dim); the autotuners' keys carry
# heads and head dims only, so each shape differs in those
GLA_SHAPES = ((4, 2048, 16, 128, 128), (8, 2048, 32, 64, 64), (2, 4096, 8, 256, 256), (2, 4096, 16, 128, 256))
GLA_CHUNK = 64  # fla's chunk length (BT in both keys)
# fla's chunked gated delta rule forward: (batch, tokens, qk heads, value heads, key dim, value dim);
# the autotuners' keys carry the heads and head dims only (H, HV, K, V, BT), so each shape differs in
# those. The second is Qwen3-Next's linear attention (16 q/k heads, 32 value heads, 128 dims).
GDN_SHAPES = ((4, 2048, 16, 16, 128, 128), (2, 4096, 16, 32, 128, 128), (8, 2048, 32, 32, 64, 64),
              (2, 4096, 8, 8, 256, 256))
GDN_CHUNK = 64  # fla's default chunk length for the gated delta rule (BT in the keys)
FLAGGEMS_RMS_ROWS = 4096  # every RMSNorm row length is called on 4,096 rows
FLAGGEMS_RMS_N = (5120, 8192, 14336, 16384)
FLAGGEMS_LN_MN = ((4096, 8192), (8192, 5120), (2048, 14336), (16384, 6144))
FLAGGEMS_LSM_MN = ((4096, 32000), (2048, 128256), (8192, 4096), (1024, 50257))
FLAGGEMS_VAR_MEAN_MN = ((4096, 5120), (2048, 14336), (16384, 4096))
FLAGGEMS_SMX_BWD_MN = ((4096, 32000), (8192, 4096), (2048, 14336))
# FlagGems' implicit-GEMM conv2d forward, bf16, ResNet-50 stages at batch 32 and one 1x1 projection:
# (batch, in channels, height, width, out channels, kernel size, stride, padding)
FLAGGEMS_CONV2D = ((32, 64, 56, 56, 64, 3, 1, 1), (32, 128, 28, 28, 128, 3, 1, 1), (32, 256, 14, 14, 256, 3, 1, 1),
                   (32, 256, 56, 56, 64, 1, 1, 0))
# FlagGems' addmv (GEMV: out = beta * inp + alpha * A @ x), bf16, A is (rows, cols): decode-time projections
# and an LM head
FLAGGEMS_ADDMV_NM = ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))
# FlagGems' L2 vector norm over the last dimension, bf16: (rows, row length)
FLAGGEMS_NORM_MN = ((4096, 4096), (16384, 2048), (2048, 14336), (1024, 32768))
# FlagGems' batched matmul, bf16: (batch, M, N, K); the autotuner's key carries M, N, K and two
# strides, not the batch, so each shape differs in M, N or K
FLAGGEMS_BMM_BMNK = ((32, 512, 512, 128), (16, 1024, 1024, 1024), (8, 2048, 4096, 128), (64, 256, 128, 2048))
# FlagGems' nearest-neighbour upsampling by 2, bf16: (batch, channels, input height, input width)
FLAGGEMS_UPSAMPLE = ((32, 64, 56, 56), (8, 128, 128, 128), (16, 256, 32, 32))
# FlagGems' attention forward (`_attn_fwd` through flag_gems.scaled_dot_product_attention), bf16,
# non-causal (the op's default; its STAGE constexpr, causal or not, is not in the key):
# (batch, heads, sequence, head dim), q heads = kv heads. The key carries KV_CTX and HEAD_DIM
# only, so each shape differs in those; batch and heads come from here. No batch is 1 or a
# multiple of 16 and every head count is, so the hd-128 shapes share one Triton specialisation
# (their compiles are cached after the first)
FLAGGEMS_ATTN = ((4, 32, 2048, 128), (8, 16, 1024, 64), (2, 16, 8192, 128), (8, 32, 1024, 128))
# FlagGems' 2-D average pooling forward, bf16, count_include_pad (the op's default):
# (batch, channels, height = width, kernel = kernel height = kernel width, stride, padding). The key
# carries the output size, kernel and stride, not batch or channels. A ResNet-stem-like 3x3/2 pool
# on 112 x 112, a DenseNet transition's 2x2/2 pool, and an Inception branch's 3x3/1 pool on 35 x 35
FLAGGEMS_AVGPOOL = ((32, 64, 112, 3, 2, 1), (64, 128, 56, 2, 2, 0), (32, 256, 35, 3, 1, 1))
# FlagGems' 2-D max pooling with indices, forward, bf16: (batch, channels, input height = width, kernel,
# stride, padding). A ResNet stem's 3x3 stride-2 pool, a 2x2 stride-2 pool on the same shape as the
# average pool's DenseNet one, and a VGG-like 2x2 stride-2 pool over 512 channels
FLAGGEMS_MAXPOOL = ((32, 64, 112, 3, 2, 1), (64, 128, 56, 2, 2, 0), (16, 512, 28, 2, 2, 0))
# FlagGems' Kronecker product of two bf16 matrices: (M1, N1, M2, N2), A is M1 x N1 and B M2 x N2; the
# autotuner's key is the output's M1*M2 x N1*N2, so each pair has its own output size
FLAGGEMS_KRON = ((64, 64, 64, 64), (32, 128, 128, 64), (16, 16, 128, 512))
# FlagGems' batch norm forward (`batch_norm_forward_kernel` through flag_gems.batch_norm), training mode,
# bf16: (batch, channels, height, width), CNN activations (a ResNet stem's output, ResNet-50's stage-1
# and stage-2 outputs, a late 14 x 14 stage at batch 128). The key is (batch_dim, spatial_dim), so each
# shape differs in those; the channels (the grid: one program per channel) come from here
FLAGGEMS_BATCH_NORM = ((32, 64, 112, 112), (64, 256, 56, 56), (128, 512, 14, 14), (32, 512, 28, 28))
# FlagGems' bicubic 2x upsampling (`_upsample_bicubic2d_row_kernel` through flag_gems.upsample_bicubic2d),
# align_corners=False (the op's default), bf16: (batch, channels, input height, input width). The key is
# the output width alone, so each shape has its own; batch, channels and heights come from here. RGB
# images (512 x 512, a 720p frame) and feature maps
FLAGGEMS_BICUBIC = ((8, 3, 512, 512), (16, 64, 128, 128), (8, 32, 256, 256), (2, 3, 720, 1280))
# FlagGems' upper triangle of a 2-D matrix (`triu_kernel` through flag_gems.triu, diagonal 0), bf16: (M, N)
FLAGGEMS_TRIU_MN = ((8192, 8192), (4096, 16384), (16384, 4096), (2048, 2048))
# FlagGems' max over the last dimension (`amax_kernel` through flag_gems.amax(x, dim=[-1])), bf16: (rows,
# row length): logits over Llama-2's and Llama-3's vocabularies, hidden states, short rows
FLAGGEMS_AMAX_MN = ((4096, 32000), (2048, 128256), (16384, 4096), (65536, 1024))
# FlagGems' weight norm over every dim but a middle one (`weight_norm_except_dim_kernel` through
# flag_gems.weight_norm(v, g, dim=1); dim 0 and the last dim take its fused `weight_norm_interface`
# kernels, under other keys), bf16: the weight v's shape. Transposed-conv weights (in, out, *kernel)
# normalised per output channel (dim 1): a pix2pix U-Net decoder's 4 x 4 up-convolution, a larger
# one, a 4 x 4 x 4 video-decoder up-convolution and a HiFi-GAN upsampling ConvTranspose1d (kernel
# 16). The key is (v_shape0, v_shape1, v_shape2) = (in, out, kernel taps), each shape its own; all
# three divisible by 16, so every shape shares one Triton specialisation
FLAGGEMS_WEIGHT_NORM = ((1024, 512, 4, 4), (2048, 1024, 4, 4), (512, 256, 4, 4, 4), (256, 128, 16))
# FlagGems' ReGLU (`reglu_kernel`, FlagGems' `gated_activation` list, through flag_gems.reglu:
# relu(a) * b of the input's two halves), bf16: (tokens, output width); the input is tokens x
# 2 x width. Feed-forward widths: T5 v1.1 large's and XXL's, Llama-2-7B's, Llama-3-8B's
FLAGGEMS_REGLU_MN = ((16384, 2816), (4096, 11008), (8192, 14336), (2048, 10240))
# FlagGems' softmax backward over a dim that is not the last (`softmax_backward_kernel_non_inner`, the
# `softmax_non_inner` list: FlagGems' forward over such a dim is heuristics alone, untuned, through
# flag_gems.ops.softmax.softmax_backward(dy, y, 1, bf16)), bf16: (M, N, K), the softmax over N, M
# before it and K after it: segmentation logits softmaxed over their classes (ADE20K's 150 at 128 x
# 128 and at 512 x 512, Cityscapes' 19 at 256 x 512) and a softmax over 2,048 tokens of 1,024
# channels (attention pooling). The key is (M, N, K)
FLAGGEMS_SMX_NON_INNER = ((8, 150, 16384), (2, 150, 262144), (8, 19, 131072), (32, 2048, 1024))
# FlagGems' instance norm forward with input statistics (`instance_norm_loop_kernel` through
# flag_gems.instance_norm, with weight and bias; the loop kernel serves spatial sizes past 4,096),
# bf16: (batch, channels, *spatial): CycleGAN generator activations at 256 x 256 input (its first
# and second stages), a style-transfer network's first stage at 512 x 512, an nnU-Net 3-D stage
# (128^3). The key is (M, N) = (batch x channels, spatial elements)
FLAGGEMS_INSTANCE_NORM = ((4, 64, 256, 256), (8, 128, 128, 128), (4, 32, 512, 512), (2, 32, 128, 128, 128))
# FlagGems' fused cross entropy forward with class indices (`celoss_indices_kernel`, the
# `cross_entropy_loss` list, through flag_gems.cross_entropy_loss(logits, target, reduction="none")),
# bf16 logits, int64 targets: the logits' shape, (rows, classes, *spatial). LLM losses over
# Llama-2's, GPT-2's and Llama-3's vocabularies (D = 1: one program per token) and ADE20K
# segmentation logits at 512 x 512 (150 classes, D = 262,144 pixels an image, BLOCK_D of them a
# program). The key is (C, D), the classes and the elements after them, so each shape has its
# own; the rows come from here
FLAGGEMS_CROSS_ENTROPY = ((8192, 32000), (4096, 50257), (2048, 128256), (4, 150, 512, 512))
# FlagGems' implicit-GEMM conv3d forward (`conv3d_forward_kernel`, the `conv3d_forward` list, through
# flag_gems.conv3d with a bias), bf16: (batch, in channels, depth, height, width, out channels,
# kernel (d, h, w), stride, padding). A video network's 3x3x3 block on 8 frames of 56 x 56 (C3D /
# R(2+1)D / I3D-like), a 3-D U-Net stage (128 channels at 32^3) and Qwen2-VL's vision patch embedding
# (a Conv3d over 2 x 14 x 14 patches of 3 channels, stride = kernel: 4,096 patches, 1,280 wide). The
# key is every size, kernel, stride and padding (each shape its own); its grown space (1,536
# configs) is past 1,000, so a seeded sample of 400 plus the list is recorded a shape
FLAGGEMS_CONV3D = ((4, 64, 8, 56, 56, 64, (3, 3, 3), (1, 1, 1), (1, 1, 1)),
                   (2, 128, 32, 32, 32, 128, (3, 3, 3), (1, 1, 1), (1, 1, 1)),
                   (4096, 3, 2, 14, 14, 1280, (2, 14, 14), (2, 14, 14), (0, 0, 0)))
# FlagGems' anti-aliased bicubic downsampling (`general_interpolate_bicubic2d_aa_kernel`, the
# `upsample_bicubic2d_aa` list, through flag_gems.ops.upsample_bicubic2d_aa._upsample_bicubic2d_aa,
# torch's interpolate(mode="bicubic", antialias=True); the op takes this kernel whenever either
# side shrinks, its 5 x 5-tap upsampling kernel otherwise), align_corners=False, bf16: (batch,
# channels, input height, input width, output height, output width). Image preprocessing: 720p
# video frames halved, 512 x 512 images to a ViT's 224 x 224, 256 x 256 ones to 224 x 224, and
# 2,048 x 2,048 photographs to SAM's 1,024 x 1,024. The key is (N, C, OH, OW) (each shape its own);
# the input sizes come from here
FLAGGEMS_BICUBIC_AA = ((8, 3, 720, 1280, 360, 640), (16, 3, 512, 512, 224, 224), (64, 3, 256, 256, 224, 224),
                       (4, 3, 2048, 2048, 1024, 1024))
# FlagGems' fp8 scaled matmul with per-token activation and per-channel weight scales
# (`_pertensor_or_pertoken_smm_kernel` through flag_gems.cutlass_scaled_mm, vLLM's signature: out, a,
# b, a_scale, b_scale, bias; no bias), fp8 e4m3 in, fp32 scales, bf16 out: (M, N, K), a M x K
# row-major, b K x N column-major (an N x K weight, transposed). vLLM's fp8 W8A8 serving of Llama-3:
# 8B's decode through q/o (4,096 x 4,096), its prefill through gate/up (14,336 x 4,096) and down
# (4,096 x 14,336), and 70B's decode through gate or up (28,672 x 8,192). The key is (_M_NPO2, N, K):
# every M is a power of two, so the key's M is the call's, and each shape has its own key
FLAGGEMS_SCALED_MM_FP8 = ((16, 4096, 4096), (2048, 14336, 4096), (4096, 4096, 14336), (16, 28672, 8192))
# FlagGems' fp8 scaled matmul with 128-wide block scales (`_block_wise_smm_kernel` through
# flag_gems.cutlass_scaled_mm: a_scale M x K/128, one per token and 128 of K, b_scale K/128 x N/128,
# one per 128 x 128 weight block, as DeepSeek-V3's and Qwen3's FP8 checkpoints are quantised; no
# bias), fp8 e4m3 in, fp32 scales, bf16 out: (M, N, K), N and K multiples of 128. Llama-3-8B's decode
# through q/o and its prefill through gate/up, Llama-3-70B's prefill through down (8,192 x 28,672),
# and DeepSeek-V3's dense-layer decode through gate/up (18,432 x 7,168). The key is (_M_NPO2, N, K),
# every M a power of two, each shape its own
FLAGGEMS_SCALED_MM_BLOCKWISE_FP8 = ((16, 4096, 4096), (2048, 14336, 4096), (2048, 8192, 28672), (16, 18432, 7168))
# flash-linear-attention's general matmul (`fla.ops.utils.matmul.matmul`: `matmul_kernel`, BM x BN
# tiles with a BK loop and G-grouped launch order, its own list of eight hand-picked tiles), bf16:
# (M, N, K). A decode batch through Llama-3-8B's gate/up (14,336 x 4,096), a prefill chunk through
# its q/o (4,096 x 4,096), a training step through its down projection (4,096 x 14,336), and an
# awkward size nothing rounds (3,000 x 5,000 x 1,000). The key is (M, N, K), each shape its own
FLA_MM_MNK = ((16, 14336, 4096), (2048, 4096, 4096), (4096, 4096, 14336), (3000, 5000, 1000))
# flash-linear-attention's layer norm for short rows (`layer_norm_fwd_kernel`, taken when D <= 512:
# BT rows of a BD-wide tile per program, its BT x warps list), through fla.modules.norm.layernorm's
# layer_norm with weight and bias, bf16: (tokens, D). Per-head norms as fla's models apply them
# (head dims 64, 128, 256) and a 512-wide channel norm; the key is D with NB = cdiv(T, 2048)
FLA_LAYERNORM_TD = ((131072, 64), (65536, 128), (32768, 256), (16384, 512))
