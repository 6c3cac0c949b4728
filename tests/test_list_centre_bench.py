"""benchmarks/list_centre_choice.py (issue 27, session 30): the centre of a kernel's list, and the
choice's nested evidence applied to it."""
from __future__ import annotations

from bench_scripts import load_benchmark


def test_the_centre_is_the_listed_config_nearest_each_parameters_middle_value():
    mod = load_benchmark("list_centre_choice")
    listed = [{"B": 16, "num_warps": 1}, {"B": 256, "num_warps": 8}, {"B": 64, "num_warps": 8},
              {"B": 64, "num_warps": 4}, {"B": 16, "num_warps": 4}]
    # middles: B 64 (of 16, 64, 256), warps 4 (of 1, 4, 8): the one config at both
    assert mod.centre(listed) == {"B": 64, "num_warps": 4}
    # an even count: the two central values are equally near their geometric middle; the one
    # listed first wins
    assert mod.centre([{"B": 128}, {"B": 8}, {"B": 32}, {"B": 512}]) == {"B": 128}
    assert mod.centre([{"B": 32}, {"B": 8}, {"B": 128}, {"B": 512}]) == {"B": 32}
