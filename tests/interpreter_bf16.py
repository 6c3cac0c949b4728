"""For child processes under TRITON_INTERPRET=1: make the interpreter's `tl.dot` correct on bf16.

Triton's interpreter keeps bf16 values as raw uint16 and would multiply the bit patterns in
`tl.dot`; widening bf16 operands to fp32 first is exact, so a bf16 kernel can be checked on
the CPU. Call `widen_bf16_dot()` before any kernel runs (the tests' child scripts do)."""
from __future__ import annotations


def widen_bf16_dot() -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    dot = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, *args):
        def widen(h):
            if h.dtype.scalar != tl.bfloat16:
                return h
            return interpreter.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return dot(self, widen(a), widen(b), d, *args)

    interpreter.InterpreterBuilder.create_dot = create_dot
