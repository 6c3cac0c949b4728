"""A row kernel whose module names the bare @triton.jit function while its caller launches it
through @triton.heuristics made where it is called (the zoo LayerNorm benchmark of issue 27):
WHOLE_ROW depends on the config's BLOCK and the row length, CONTIG on a tensor's stride, which
a compile worker's stand-in tensors do not have."""
import triton
import triton.language as tl


@triton.jit
def row_scale(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, WHOLE_ROW: tl.constexpr, CONTIG: tl.constexpr):
    row = tl.program_id(0)
    if WHOLE_ROW:
        offs = tl.arange(0, BLOCK)
        m = offs < n_cols
        tl.store(y_ptr + row * n_cols + offs, tl.load(x_ptr + row * n_cols + offs, mask=m) * 2, mask=m)
    else:
        for start in range(0, n_cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n_cols
            tl.store(y_ptr + row * n_cols + offs, tl.load(x_ptr + row * n_cols + offs, mask=m) * 2, mask=m)


HEURISTICS = {"WHOLE_ROW": lambda a: a["BLOCK"] >= a["n_cols"],
              "CONTIG": lambda a: a["x_ptr"].stride(0) == a["n_cols"]}


def wrapped():
    """What the caller builds and hands to the autotuner (a new object per call)."""
    return triton.heuristics(HEURISTICS)(row_scale)
