"""What worker processes send back: typed records, not dicts (they pickle across the pipe and
the process pool like any dataclass of plain values)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompileResult:
    """One config compiled (or not) in a compile worker, with its static facts."""

    status: str
    compile_s: float = 0.0
    registers: int | None = None
    smem_bytes: int | None = None
    spills: int | None = None
    spills_source: str = "ptxas"  # "ptxas": spill-store bytes; "triton": Triton's count x 4
    stack_bytes: int | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def with_compile_s(self, seconds: float) -> "CompileResult":
        import dataclasses

        return dataclasses.replace(self, compile_s=seconds)


@dataclass(frozen=True)
class BenchReply:
    """One config (or the vendor implementation, config None) timed in the benchmark worker."""

    status: str
    time_ms: float | None = None
    samples_ms: tuple[float, ...] = ()
    bench_s: float = 0.0
    first_call_s: float | None = None
    rel_err: float | None = None
    early_stop: bool = False
    error: str = ""
    sticky: bool = False  # the CUDA context is poisoned: the worker exits after replying
    # facts read from the loaded binary at the first launch (compile workers that never load
    # a binary cannot): registers per thread, spill bytes (Triton's count x 4), shared memory
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    compiled_here: bool = False  # Triton compiled the config at the first launch (a cache miss)
    timing: str = "events"  # how the samples were taken: "events" per launch, or "graph" (CUDA graph)


@dataclass(frozen=True)
class InterleavedReply:
    """Samples per config of an interleaved re-timing (round-robin over the configs)."""

    samples: list[list[float]] = field(default_factory=list)
    status: str = "ok"
    error: str = ""
    sticky: bool = False


@dataclass(frozen=True)
class SetupReply:
    """The benchmark worker holds a problem's inputs, reference and flush buffer."""

    device: str
    ok: bool = True
