"""The theory library: why a config can be slow, what to change, and how much it should help.

A `Theory` is data plus three small functions over a `Diagnosis`:
  - `applies(diag, problem, space, config)`: the precondition (is this explanation live?);
  - `propose(diag, problem, space, config)`: transformations over parameter *roles*
    (tile:M, tile:K, warps, stages, group, split:K ...), only valid configs;
  - `expected_gain(diag, problem, space, config, proposal)`: the predicted relative speed-up
    (0.2 = 20% faster, negative = slower), used to rank hypotheses. Gains are priors scaled by
    what the diagnosis measured, and never exceed the distance to the roof (`headroom`).

`hypotheses(diag, ...)` asks every theory and returns the proposals ranked by expected gain.
Each theory below reads on its own: its precondition, its moves and its one-line reasoning.

The theories are grouped by the resource they reason about: `tiles` (tile sizes against the
problem's dims: padding, operand reuse, shape), `parallelism` (work for every SM: programs
and waves), `pipeline` (the software pipeline along the reduction loop), `occupancy`
(registers, warps, shared memory and resident blocks per SM) and `memory` (traffic: a row
read once, operands shared in L2). `base` holds the `Theory` record, the thresholds and the
role helpers they share; `registry` the library's order and `hypotheses`.
"""
from .base import (DEFAULT_HEADROOM, ELEMS_PER_THREAD, ELEMS_PER_THREAD_OTHER, GROUP_MIN_TILES, NEAR_ROOF,
                   PADDING_BUSY_FLOOR, PADDING_MIN, WAVE_EFF_MIN, Applies, Gain, Hypothesis, Propose, Theory,
                   headroom, set_role, step_roles)
from .memory import L2_GROUPING, ONE_BLOCK_ROW
from .occupancy import (OCCUPANCY_GAIN, OCCUPANCY_MAX_BLOCKS, OCCUPANCY_MIN_GAIN, ONE_MORE_BLOCK, PRESSURE,
                        WARPS_MATCHED)
from .parallelism import UNDERFILLED, WAVES
from .pipeline import LATENCY, SHALLOW_LOOP
from .registry import BY_NAME, LIBRARY, hypotheses
from .tiles import PADDING, SHAPE_GAIN, TILE_SHAPE, UNDERTILED

__all__ = ["Applies", "BY_NAME", "DEFAULT_HEADROOM", "ELEMS_PER_THREAD", "ELEMS_PER_THREAD_OTHER", "GROUP_MIN_TILES",
           "Gain", "Hypothesis", "L2_GROUPING", "LATENCY", "LIBRARY", "NEAR_ROOF", "OCCUPANCY_GAIN",
           "OCCUPANCY_MAX_BLOCKS", "OCCUPANCY_MIN_GAIN", "ONE_BLOCK_ROW", "ONE_MORE_BLOCK", "PADDING",
           "PADDING_BUSY_FLOOR", "PADDING_MIN", "PRESSURE", "Propose", "SHALLOW_LOOP", "SHAPE_GAIN", "TILE_SHAPE",
           "Theory", "UNDERFILLED", "UNDERTILED", "WARPS_MATCHED", "WAVES", "WAVE_EFF_MIN", "headroom",
           "hypotheses", "set_role", "step_roles"]
