"""Child processes for the zoo kernels' tests: a script run with the repository's `src` and
`tests` on the path, answering one `RESULTS<json>` line (the interpreter is chosen before
`import triton`, so interpreted runs and offline sm_90 compiles each need their own process)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"

# compile-only launches as the live evaluator's compile pool does them: offline sm_90 target,
# meta tensors from make_inputs (kernels that mix dtypes give no tensor_shapes)
LAUNCH_SCRIPT = textwrap.dedent("""
    import json, sys
    from abductune import kernels
    from abductune.measure.worker import _init_compile_worker, _first_launch
    _init_compile_worker((90, 32))
    out = []
    for name, dims, cfg in json.loads(sys.argv[1]):
        spec = kernels.get(name)
        problem = spec.problem(dims)
        inputs = spec.make_inputs(problem, "meta", 0)
        res = spec.alloc_output(problem, inputs)
        out.append(_first_launch(lambda: spec.launch(cfg, inputs, res)))
    print("RESULTS" + json.dumps(out))
""")


def check_configs(spec: object, problem: object, inputs: tuple, configs: list, **tags: object) -> list[dict]:
    """In a child: each config, then the torch baseline (config None), run on an output filled
    with NaN (an element the kernel forgets to write fails the check) and checked against the
    reference; one row each, with `tags` added."""
    import math

    ref = spec.reference(inputs)
    rows = []
    for cfg in list(configs) + [None]:
        out = spec.alloc_output(problem, inputs)
        out.fill_(float("nan"))
        if cfg is None:
            spec.torch_baseline(inputs, out)
        else:
            spec.launch(cfg, inputs, out)
        ok, err = spec.check(out, ref)
        rows.append({**tags, "config": cfg, "ok": ok, "rel_err": err if math.isfinite(err) else None,
                     "dtype": str(out.dtype)})
    return rows


def run_child(script: str, arg: object, tmp_path: Path, **env: str) -> list[dict]:
    """`script` run with `arg` as JSON in argv[1]; its RESULTS. The interpreter only where
    `env` asks for it (an outer TRITON_INTERPRET would turn a compile check into a no-op)."""
    full = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"),
            "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)]), **env}
    if "TRITON_INTERPRET" not in env:
        full.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", script, json.dumps(arg)], capture_output=True, text=True,
                       env=full, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert r.returncode == 0 and line, f"child failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return json.loads(line[len("RESULTS"):])
