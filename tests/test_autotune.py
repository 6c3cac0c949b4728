"""@abductune.autotune on kernels of the kinds people write (tests/autotune_kernels), on the CPU
under Triton's interpreter: results, hooks, bucketing, the accuracy gate, pruning, do_bench,
implementation choice, the miss policies, the space grown around a list and patch_triton.

Timing is an injected deterministic timer (config -> ms), so winners are known in advance."""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

from autotune_kernels import INTERPRET, interpreted

if INTERPRET:  # in the interpreted child process: TRITON_INTERPRET=1 was set before triton is imported
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    from autotune_kernels import attention as att
    from autotune_kernels import layernorm as ln
    from autotune_kernels import matmul as mm
    from autotune_kernels import softmax as sm

    import abductune
    from abductune.autotune import Autotuner, config_dict, space_from_configs
    from abductune.errors import AbductuneError
    from abductune.store import Store


HERE = Path(__file__).resolve().parent


class Timer:
    """Deterministic timer: ms = table(config); runs each trial `runs` times (hooks included)."""

    def __init__(self, fn, runs: int = 0):
        self.fn, self.runs, self.seen = fn, runs, []

    def __call__(self, cfg, launch):
        for _ in range(self.runs):
            launch()
        self.seen.append(dict(cfg))
        return [self.fn(cfg)]


def mm_time(cfg):  # the list's second config is the fastest
    if "impl" in cfg:
        return 5.0
    return {(16, 16): 3.0, (32, 16): 1.0, (32, 32): 2.0}.get((cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"]), 4.0)


def kw(cfg):
    return {k: v for k, v in cfg.kwargs.items()}


@interpreted
def test_matmul_tunes_its_list_once_and_launches_the_winner(tmp_path: Path):
    timer = Timer(mm_time)
    k = mm.make(store=tmp_path / "s.sqlite", timer=timer)
    a, b = torch.randn(40, 24), torch.randn(24, 36)
    c = mm.matmul(k, a, b)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    assert len(timer.seen) == 3 and k.stats["evaluations"] == 3  # the list, as triton.autotune
    assert kw(k.best_config) == kw(mm.CONFIGS[1]) and k.best_config.num_warps == 4
    c2 = mm.matmul(k, a, b)  # hit: nothing measured again
    torch.testing.assert_close(c2, a @ b, atol=1e-4, rtol=1e-4)
    assert len(timer.seen) == 3 and k.stats["tunes"] == 1
    with Store(tmp_path / "s.sqlite") as s:
        [run] = s.runs()
        assert run.status == "done" and run.winner_id is not None
        [w] = s.by_id([run.winner_id])
        assert w.config["BLOCK_SIZE_M"] == 32 and w.config["BLOCK_SIZE_N"] == 16 and w.time_ms == 1.0
        assert run.context.dims == {"M": 40, "N": 36, "K": 24} and run.context.dtypes["a_ptr"] == "fp32"


@interpreted
def test_hit_path_is_a_dict_lookup(tmp_path: Path, monkeypatch):
    k = mm.make(store=tmp_path / "s.sqlite", timer=Timer(mm_time))
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    mm.matmul(k, a, b)
    from abductune.autotune import autotuner as at_mod  # where the miss path looks the store up

    def boom(*a, **k):
        raise AssertionError("a hit must not reach the store or the tuner")
    monkeypatch.setattr(at_mod, "open_store", boom)
    monkeypatch.setattr(k, "_miss", boom)
    torch.testing.assert_close(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    with pytest.raises(AssertionError):  # a new key does miss
        mm.matmul(k, torch.randn(8, 16), b)


@interpreted
def test_pow2_bucket_tunes_two_sizes_once(tmp_path: Path):
    timer = Timer(lambda c: {16: 3.0, 32: 2.0, 64: 1.0}[c["BLOCK_SIZE"]])
    k = sm.make(store=tmp_path / "s.sqlite", timer=timer, bucket={"n_cols": "pow2"})
    for cols in (40, 50):  # both in the bucket 64
        x = torch.randn(3, cols)
        torch.testing.assert_close(sm.softmax(k, x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    assert k.stats["tunes"] == 1 and len(timer.seen) == 3 and len(k.choices) == 1
    sm.softmax(k, torch.randn(3, 20))  # bucket 32: a new key
    assert k.stats["tunes"] == 2
    exact = sm.make(store=tmp_path / "e.sqlite", timer=Timer(timer.fn))
    for cols in (40, 50):
        sm.softmax(exact, torch.randn(3, cols))
    assert exact.stats["tunes"] == 2  # the default bucket is the exact value, as in Triton


@interpreted
def test_reference_gate_rejects_configs_with_wrong_outputs(tmp_path: Path):
    fast_but_wrong = lambda c: {16: 1.0, 32: 2.0, 64: 3.0}[c["BLOCK_SIZE"]]  # noqa: E731
    x = torch.randn(4, 40)  # BLOCK_SIZE 16 and 32 normalise only part of a row
    blind = sm.make(store=tmp_path / "a.sqlite", timer=Timer(fast_but_wrong))
    assert not torch.allclose(sm.softmax(blind, x), torch.softmax(x, -1), atol=1e-3)
    gated = sm.make(store=tmp_path / "b.sqlite", timer=Timer(fast_but_wrong),
                    reference=lambda a: {"out_ptr": torch.softmax(a["in_ptr"], -1)})
    torch.testing.assert_close(sm.softmax(gated, x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    assert gated.best_config.kwargs == {"BLOCK_SIZE": 64}
    with Store(tmp_path / "b.sqlite") as s:
        status = {m.config["BLOCK_SIZE"]: m.status.value for m in s.measurements(s.runs()[0].context)}
    assert status == {16: "wrong_result", 32: "wrong_result", 64: "ok"}


@interpreted
def test_configs_beyond_the_list_must_give_what_the_lists_own_config_gives(tmp_path: Path, caplog):
    """`budget=` grows the list [BLOCK_SIZE 64] one step each way; at 40 columns BLOCK_SIZE 32
    normalises part of each row, and the timer makes it the fastest. With no `reference=`, the
    list's own config vouches: 32 is `wrong_result` and never wins. `reference=lambda a: {}`
    (check nothing) turns the check off, and then the wrong config wins: what the check prevents."""
    one = [triton.Config({"BLOCK_SIZE": 64}, num_warps=4)]
    fast_small = lambda c: c["BLOCK_SIZE"] / 64 + c.get("num_warps", 4) / 100  # noqa: E731
    x = torch.randn(4, 40)
    k = abductune.autotune(configs=one, key=["n_cols"], budget=20, store=tmp_path / "a.sqlite",
                           timer=Timer(fast_small))(sm.softmax_kernel)
    torch.testing.assert_close(sm.softmax(k, x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    with Store(tmp_path / "a.sqlite") as s:
        ms = s.measurements(s.runs()[0].context)
    small = [m for m in ms if m.config["BLOCK_SIZE"] == 32]
    assert small and all(m.status.value == "wrong_result" for m in small)
    assert "differ from the kernel's own config" in small[0].error and "relative error" in small[0].error
    assert any(m.config["BLOCK_SIZE"] == 128 and m.status.value == "ok" for m in ms)  # right, and checked
    assert k.best_config.kwargs["BLOCK_SIZE"] == 64
    blind = abductune.autotune(configs=one, key=["n_cols"], budget=20, store=tmp_path / "b.sqlite",
                               timer=Timer(fast_small), reference=lambda a: {})(sm.softmax_kernel)
    assert not torch.allclose(sm.softmax(blind, x), torch.softmax(x, -1), atol=1e-3)
    assert blind.best_config.kwargs["BLOCK_SIZE"] == 32
    # in place (out is x): each run of the list's config changes the tensor it checks, so that
    # tensor is not checked, and the log says so; nothing is called wrong for it
    inplace = abductune.autotune(configs=one, key=["n_cols"], budget=20, store=tmp_path / "c.sqlite",
                                 timer=Timer(fast_small))(sm.softmax_kernel)
    y = torch.randn(4, 40)
    with caplog.at_level("INFO", logger="abductune"):
        sm.softmax(inplace, y, out=y)
    assert any("differ between two runs of the kernel's own config" in m and "in_ptr" in m for m in caplog.messages)
    with Store(tmp_path / "c.sqlite") as s:
        assert not [m for m in s.measurements(s.runs()[0].context) if m.status.value == "wrong_result"]


@interpreted
def test_a_kernels_early_config_prune_is_asked_once_per_config_beyond_the_list(tmp_path: Path):
    """The list check asks whether a config is pruned before preparing itself; the kernel's own
    `early_config_prune` still runs once a config, not twice."""
    asked = []

    def keep_all(configs, nargs, **kw):
        asked.extend(tuple(sorted(c.all_kwargs().items())) for c in configs)
        return configs
    one = [triton.Config({"BLOCK_SIZE": 64}, num_warps=4)]
    k = abductune.autotune(configs=one, key=["n_cols"], budget=8, store=tmp_path / "a.sqlite",
                           timer=Timer(lambda c: 1.0), prune_configs_by={"early_config_prune": keep_all})(sm.softmax_kernel)
    sm.softmax(k, torch.randn(2, 40))
    beyond = [a for a in asked if dict(a) != {"BLOCK_SIZE": 64, "num_warps": 4} and len(a) > 1]
    assert beyond and len(beyond) == len(set(beyond))


def _ln_expected(x, y0, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    xhat = (x - mean) / torch.sqrt(var + eps)
    stats = (((x - mean) ** 2).sum(-1) / (var.squeeze(-1) + eps)).sum()
    return y0 + xhat * w + b, stats


@interpreted
def test_layernorm_hooks_keep_accumulators_exact(tmp_path: Path):
    timer = Timer(lambda c: {16: 2.0, 32: 1.0, 64: 3.0}[c["BLOCK_SIZE"]], runs=2)  # 2 extra trials per config
    x, y0 = torch.randn(4, 40), torch.randn(4, 40)
    w, b = torch.rand(40) + 0.5, torch.randn(40)
    want_y, want_stats = _ln_expected(x, y0, w, b)
    k = ln.make(store=tmp_path / "s.sqlite", timer=timer,
                reference=lambda a: {"Y": want_y, "Stats": want_stats.reshape(1)})
    y, stats = y0.clone(), torch.full((1,), 7.0)  # reset_to_zero: Triton zeroes it before the real launch
    ln.layernorm_acc(k, x, y, w, b, stats)
    # 3 configs x (1 checked + 2 timed) trials ran; Y got LN(x) once, Stats one sum
    torch.testing.assert_close(y, want_y, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(stats, want_stats.reshape(1), atol=1e-3, rtol=1e-4)
    assert k.best_config.kwargs == {"BLOCK_SIZE": 32}
    with Store(tmp_path / "s.sqlite") as s:  # checked between the launch and the restore: all correct
        assert {m.status.value for m in s.measurements(s.runs()[0].context)} == {"ok"}


@interpreted
def test_attention_with_user_hooks_and_a_config_pre_hook(tmp_path: Path):
    calls = {"pre": 0, "reset_only": 0, "post": 0, "cfg": 0}

    def pre_hook(nargs, reset_only=False):
        calls["reset_only" if reset_only else "pre"] += 1
        assert "Q" in nargs and "BLOCK_M" in nargs or reset_only

    def post_hook(nargs, exception):
        assert exception is None
        calls["post"] += 1

    def cfg_hook(nargs):
        calls["cfg"] += 1
    configs = list(att.CONFIGS)
    configs[2] = triton.Config(dict(configs[2].kwargs), num_warps=4, num_stages=3, pre_hook=cfg_hook)
    timer = Timer(lambda c: {(16, 16): 3.0, (32, 16): 2.0, (16, 32): 1.0}[c["BLOCK_M"], c["BLOCK_N"]], runs=1)
    k = abductune.autotune(configs=configs, key=["N_CTX", "HEAD_DIM"], pre_hook=pre_hook, post_hook=post_hook,
                           store=tmp_path / "s.sqlite", timer=timer)(att.attn_fwd)
    q, kk, v = (torch.randn(2, 24, 16) for _ in range(3))
    out = att.attention(k, q, kk, v)
    ref = torch.softmax(q @ kk.transpose(1, 2) * 16 ** -0.5, -1) @ v
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    assert calls["pre"] == calls["post"] == 6  # 3 configs x (checked + timed) trials, each pre then post
    assert calls["reset_only"] == 1  # after tuning, as Triton
    assert calls["cfg"] == 3  # the winner's own hook: its 2 trials and the real launch
    assert k.best_config.pre_hook is cfg_hook


@interpreted
def test_predict_serves_at_once_and_swaps_the_winner_in(tmp_path: Path):
    # the background tune's trials wait on a gate (its pre_hook), so the caller's launch runs
    # alone (Triton's interpreter is not thread-safe; on a GPU both may run at once)
    gate = threading.Event()

    def gated(nargs, reset_only=False):
        assert gate.wait(30)
    t = lambda cfg: {(16, 16): 3.0, (32, 16): 2.0, (32, 32): 1.0}[cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"]]  # noqa: E731
    k = mm.make(store=tmp_path / "s.sqlite", timer=Timer(t), on_miss="predict", pre_hook=gated)
    a, b = torch.randn(40, 32), torch.randn(32, 32)
    c = mm.matmul(k, a, b)  # served at once: the tune cannot have measured anything yet
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    [choice] = k.choices.values()
    assert choice.source == "predicted" and choice.config["BLOCK_SIZE_M"] == 16  # the list's first
    before = c.clone()
    gate.set()
    k.wait(60)
    [choice] = k.choices.values()
    assert choice.source == "tuned" and (choice.config["BLOCK_SIZE_M"], choice.config["BLOCK_SIZE_N"]) == (32, 32)
    torch.testing.assert_close(c, before)  # the background tune ran on copies of the arguments
    torch.testing.assert_close(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    # another process, a nearby shape (M=48: the bucket group of 40): the stored winner is served
    gate.clear()
    other = mm.make(store=tmp_path / "s.sqlite", timer=Timer(t), on_miss="predict", pre_hook=gated)
    mm.matmul(other, torch.randn(48, 32), b)
    [choice] = other.choices.values()
    assert choice.source == "predicted" and (choice.config["BLOCK_SIZE_M"], choice.config["BLOCK_SIZE_N"]) == (32, 32)
    gate.set()
    other.wait(60)


@interpreted
def test_implementation_choice_can_win_per_key(tmp_path: Path):
    used = []

    def torch_mm(a, b, c, M, N, K, *strides):
        used.append(M)
        c.copy_(a @ b)
    timer = Timer(lambda cfg: 0.5 if "impl" in cfg else mm_time(cfg))
    k = mm.make(store=tmp_path / "s.sqlite", timer=timer, implementations={"torch": torch_mm})
    a, b = torch.randn(24, 16), torch.randn(16, 8)
    torch.testing.assert_close(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    [choice] = k.choices.values()
    assert choice.config == {"impl": "torch"}
    used.clear()
    torch.testing.assert_close(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    assert used == [24]  # the call went to torch
    with Store(tmp_path / "s.sqlite") as s:
        ctx = s.runs()[0].context
        rows = s.measurements(ctx)
        impl_rows = [m for m in rows if m.config == {"impl": "torch"}]
        assert [m.kind for m in impl_rows] == ["baseline", "verify"] and all(m.time_ms == 0.5 for m in impl_rows)
        # torch was re-timed in the final run-off side by side with the Triton winner
        runoff = [m for m in rows if m.kind == "verify"]
        assert len(runoff) >= 2 and any("impl" not in m.config for m in runoff)
    fresh = mm.make(store=tmp_path / "s.sqlite", timer=Timer(lambda c: 1 / 0),
                    implementations={"torch": torch_mm})
    mm.matmul(fresh, a, b)  # decided from the store alone
    assert fresh.stats["evaluations"] == 0 and next(iter(fresh.choices.values())).config == {"impl": "torch"}


@interpreted
def test_prune_configs_by_is_applied_before_measuring(tmp_path: Path):
    timer = Timer(mm_time)
    drop_k32 = lambda configs, nargs, **kw: [c for c in configs if c.kwargs["BLOCK_SIZE_K"] != 32]  # noqa: E731
    k = mm.make(store=tmp_path / "s.sqlite", timer=timer, prune_configs_by={"early_config_prune": drop_k32})
    mm.matmul(k, torch.randn(16, 16), torch.randn(16, 16))
    assert len(timer.seen) == 2 and all(c["BLOCK_SIZE_K"] == 16 for c in timer.seen)
    # perf_model + top_k=1 leaves one config: launched without timing and without the store
    model = lambda **kw: kw["BLOCK_SIZE_M"] * 1.0  # noqa: E731
    one = mm.make(store=tmp_path / "t.sqlite", timer=timer,
                  prune_configs_by={"perf_model": model, "top_k": 1})
    c = mm.matmul(one, torch.randn(16, 16), torch.eye(16))
    assert len(timer.seen) == 2 and one.best_config.kwargs["BLOCK_SIZE_M"] == 16
    assert not (tmp_path / "t.sqlite").exists() and c.shape == (16, 16)


@interpreted
def test_do_bench_is_called_like_triton(tmp_path: Path):
    seen = []

    def do_bench(fn, quantiles=None):
        fn()
        seen.append(quantiles)
        t = 1.0 + len(seen) / 10  # the first config measured is the fastest
        return [t, t * 0.9, t * 1.1]
    k = sm.make(store=tmp_path / "s.sqlite", do_bench=do_bench, judge=False)
    x = torch.randn(2, 16)
    sm.softmax(k, x)
    assert seen == [(0.5, 0.2, 0.8)] * 3 and k.best_config.kwargs == {"BLOCK_SIZE": 16}
    with Store(tmp_path / "s.sqlite") as s:
        rows = s.measurements(s.runs()[0].context)
    assert [len(m.samples_ms) for m in rows] == [3, 3, 3] and rows[0].time_ms == pytest.approx(1.1)


@interpreted
def test_a_search_beyond_the_list_finds_a_better_config(tmp_path: Path):
    space = space_from_configs(mm.CONFIGS)
    assert space["BLOCK_SIZE_M"].values == (16, 32) and space["num_stages"].values == (2, 3)
    assert space["GROUP_SIZE_M"].values == (2,) and "num_ctas" not in space.names
    hull = space_from_configs([triton.Config({"B": 16, "S": 3}), triton.Config({"B": 64, "S": 5}, num_ctas=2)])
    assert hull["B"].values == (16, 32, 64) and hull["S"].values == (3, 4, 5) and hull["num_ctas"].values == (1, 2)

    def t(cfg):  # best outside the list: BLOCK_SIZE_N 32 with BLOCK_SIZE_K 16 and 2 stages
        return 1.0 + (cfg["BLOCK_SIZE_N"] != 32) + (cfg["BLOCK_SIZE_K"] != 16) + 0.5 * (cfg["num_stages"] != 2) \
            + 0.1 * (cfg["BLOCK_SIZE_M"] != 32) + 0.01 * (cfg["num_warps"] != 4)
    listed = min(t(space.default() | config_dict(c)) for c in mm.CONFIGS)
    # with a budget the space also grows one step beyond the list's hull (tiles x2 and /2, warps,
    # stages), so the first polls reach further: 24 evaluations find the inner optimum
    k = mm.make(store=tmp_path / "s.sqlite", timer=Timer(t), budget=24)
    assert k.space["BLOCK_SIZE_M"].values == (8, 16, 32, 64) and k.space["GROUP_SIZE_M"].values == (1, 2, 4)
    mm.matmul(k, torch.randn(16, 16), torch.randn(16, 16))
    r = k.last_result
    assert r.evaluations <= 24 and r.winner.time_ms < listed
    assert r.winner.config["BLOCK_SIZE_N"] == 32 and r.winner.config["BLOCK_SIZE_K"] == 16
    assert r.baselines["configs"].time_ms == listed  # the list is measured and reported beside


@interpreted
def test_a_new_shape_first_tries_the_winner_of_the_nearest_shape_tuned_before(tmp_path: Path):
    """With a budget, a key of a kernel tuned before on another shape (another bucket) puts that
    shape's winner first among the bets beyond its list: it was measured on this very kernel."""
    def t(cfg):  # best outside the list, on every shape
        return 1.0 + (cfg["BLOCK_SIZE_N"] != 32) + (cfg["BLOCK_SIZE_K"] != 16) + 0.5 * (cfg["num_stages"] != 2) \
            + 0.1 * (cfg["BLOCK_SIZE_M"] != 32) + 0.01 * (cfg["num_warps"] != 4)
    k = mm.make(store=tmp_path / "s.sqlite", timer=Timer(t), budget=24)
    b = torch.randn(16, 16)
    mm.matmul(k, torch.randn(16, 16), b)
    won = dict(k.last_result.winner.config)
    assert won not in [k.space.default() | config_dict(c) for c in mm.CONFIGS]  # found beyond the list
    mm.matmul(k, torch.randn(200, 16), b)  # another shape bucket of the same kernel
    first = k.last_result.history[0]  # the first config the second tune measured
    assert dict(first.config) == won and first.time_ms == t(won)
    assert k.last_result.winner.time_ms <= t(won)


@interpreted
def test_user_mistakes_raise_clear_errors(tmp_path: Path):
    with pytest.raises(AbductuneError, match="key names Q.*arguments of softmax_kernel"):
        abductune.autotune(configs=sm.CONFIGS, key=["Q"])(sm.softmax_kernel)
    with pytest.raises(AbductuneError, match="bucket names M"):
        abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], bucket={"M": "pow2"})(sm.softmax_kernel)
    with pytest.raises(AbductuneError, match="'exact', 'pow2'"):
        abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], bucket="log")(sm.softmax_kernel)
    with pytest.raises(AbductuneError, match="unknown strategy 'annealing'"):
        abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], strategy="annealing")(sm.softmax_kernel)
    with pytest.raises(AbductuneError, match="on_miss"):
        abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], on_miss="later")(sm.softmax_kernel)
    with pytest.raises(AbductuneError, match="no parameter for"):
        abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], space=abductune.Space(
            [abductune.Choice("num_warps", [1, 2])]))(sm.softmax_kernel)
    k = sm.make(store=tmp_path / "s.sqlite", timer=Timer(lambda c: 1.0))
    x = torch.randn(2, 16)
    with pytest.raises(AbductuneError, match="conflicting meta-parameters: BLOCK_SIZE"):
        k[(2,)](x, x, 16, 16, 16, BLOCK_SIZE=16)
    with pytest.raises(AbductuneError, match="decorates a @triton.jit function"):
        abductune.autotune(configs=sm.CONFIGS, key=[])(42)


@interpreted
def test_an_empty_config_list_is_refused_when_decorating(tmp_path: Path):
    """Issue 28 item 19: configs=[] tunes nothing and used to fail at the first launch with a
    Triton traceback; it is refused at decoration (budget= alone gives no space), space= works."""
    for kwargs in ({}, {"budget": 8}, {"implementations": {"torch": lambda *a, **k: None}}):
        with pytest.raises(AbductuneError, match=r"configs=\[\] has nothing to tune.*space="):
            abductune.autotune(configs=[], key=["n_cols"], **kwargs)
        with pytest.raises(AbductuneError, match=r"configs=\[\] has nothing to tune"):
            Autotuner(sm.softmax_kernel, sm.softmax_kernel.arg_names, [], ["n_cols"], **kwargs)
    with pytest.raises(AbductuneError, match="no configs has nothing to tune"):
        abductune.autotune(key=["n_cols"])
    space = abductune.Space([abductune.Choice("BLOCK_SIZE", [16, 32]), abductune.Choice("num_warps", [1, 2])])
    timer = Timer(lambda c: 1.0 if c["BLOCK_SIZE"] == 16 else 2.0)
    k = abductune.autotune(configs=[], key=["n_cols"], space=space, budget=4, store=tmp_path / "s.sqlite",
                           timer=timer)(sm.softmax_kernel)
    x = torch.randn(2, 16)
    torch.testing.assert_close(sm.softmax(k, x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    assert k.best_config.kwargs["BLOCK_SIZE"] == 16


@interpreted
def test_a_tensor_key_is_its_shape_and_dtype_never_its_values(tmp_path: Path):
    """Issue 28 item 4: a tensor named in key= is keyed by (shape, dtype), as a user means:
    a new tensor of the same shape and dtype hits, another shape tunes, and the store holds
    the shape and dtype, never the tensor's printed values."""
    timer = Timer(lambda c: {16: 3.0, 32: 2.0, 64: 1.0}[c["BLOCK_SIZE"]])
    k = abductune.autotune(configs=sm.CONFIGS, key=["in_ptr"], store=tmp_path / "s.sqlite",
                           timer=timer)(sm.softmax_kernel)
    x = torch.randn(3, 40)
    torch.testing.assert_close(sm.softmax(k, x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    assert k.stats["tunes"] == 1 and len(timer.seen) == 3
    y = torch.randn(3, 40)  # another tensor, same shape and dtype: the same key
    torch.testing.assert_close(sm.softmax(k, y), torch.softmax(y, -1), atol=1e-5, rtol=1e-5)
    assert k.stats["tunes"] == 1 and len(timer.seen) == 3 and len(k.choices) == 1
    sm.softmax(k, torch.randn(5, 40))  # another shape: another key
    assert k.stats["tunes"] == 2
    with Store(tmp_path / "s.sqlite") as s:
        ctxs = {r.context.problem_key: r.context for r in s.runs()}
        rows = s.execute("SELECT problem_key, dims, dtypes FROM contexts")
    assert len(ctxs) == 2
    dims = sorted(c.dims["in_ptr.dim0"] for c in ctxs.values())
    assert dims == [3, 5] and all(c.dims["in_ptr.dim1"] == 40 for c in ctxs.values())
    assert all(c.dtypes["key:in_ptr"] == "fp32" for c in ctxs.values())
    text = " ".join(" ".join(map(str, r)) for r in rows)
    assert "tensor(" not in text and f"{float(x[0, 0]):.4f}" not in text and len(text) < 1000
    with pytest.raises(AbductuneError, match="key argument 'n_cols' is a list"):
        abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], store=tmp_path / "s.sqlite",
                           timer=timer)(sm.softmax_kernel)._key((x, x, 40, 40, list(range(100))), {})


@interpreted
def test_print_autotuning_like_triton(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("ABDUCTUNE_PRINT_AUTOTUNING", "1")
    k = sm.make(store=tmp_path / "s.sqlite", timer=Timer(lambda c: c["BLOCK_SIZE"] / 10))
    sm.softmax(k, torch.randn(2, 16))
    out = capsys.readouterr().out
    assert out.count("Autotuning kernel softmax_kernel with config") == 3
    assert "abductune autotuning for function softmax_kernel" in out and "best config selected: " in out
    assert "'BLOCK_SIZE': 16" in out.split("best config selected:")[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@interpreted
def test_patch_triton_turns_an_unmodified_triton_autotune_kernel_into_ours(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    original = triton.autotune
    timer = Timer(lambda c: {16: 2.0, 32: 1.0}[c["BLOCK"]])
    with abductune.patch_triton(store=tmp_path / "s.sqlite", timer=timer) as patch:
        assert triton.autotune is original  # the seam is Triton's Autotuner class, not the decorator
        mod = _load(HERE / "autotune_kernels" / "plain_triton.py", "plain_triton_patched")
    assert triton.autotune is original and triton.runtime.autotuner.autotune is original
    assert isinstance(mod.scale_kernel, Autotuner) and isinstance(mod.scale_kernel, triton.runtime.Autotuner)
    assert patch.autotuners == [mod.scale_kernel] and patch.left_alone == []
    x = torch.randn(50)
    torch.testing.assert_close(mod.scale(x, 3.0), x * 3.0)
    assert len(timer.seen) == 2 and mod.scale_kernel.best_config.kwargs == {"BLOCK": 32}
    with Store(tmp_path / "s.sqlite") as s:
        assert [r.context.kernel for r in s.runs()] == ["scale_kernel"]
    plain = _load(HERE / "autotune_kernels" / "plain_triton.py", "plain_triton_unpatched")
    assert type(plain.scale_kernel) is triton.runtime.autotuner.Autotuner  # after the patch: Triton's
    p = abductune.patch_triton(budget=4)  # the handle form
    assert isinstance(_load(HERE / "autotune_kernels" / "plain_triton.py", "plain_triton_handle").scale_kernel,
                      Autotuner)
    p.undo()
    assert type(_load(HERE / "autotune_kernels" / "plain_triton.py", "plain_triton_after").scale_kernel) \
        is triton.runtime.autotuner.Autotuner


@interpreted
def test_a_budget_below_the_list_still_measures_the_whole_list_and_says_so_once(tmp_path: Path, caplog):
    """`patch_triton(budget=N)` meets lists of every length: a budget below a kernel's list never
    cuts it short (triton.autotune's pick is never missed), searches nothing beyond it, and the
    log says so once, with the budget that would search beyond it."""
    n = len(mm.CONFIGS)
    assert n > 2

    names = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps", "num_stages")
    listed = [tuple(config_dict(c)[n] for n in names) for c in mm.CONFIGS]

    def t(cfg):  # the list's last config is its fastest; anything beyond it is slower
        here = tuple(cfg[n] for n in names)
        return 2.0 - 0.1 * listed.index(here) if here in listed else 5.0
    k = mm.make(store=tmp_path / "s.sqlite", timer=Timer(t), budget=2)
    b = torch.randn(16, 16)
    with caplog.at_level("WARNING", logger="abductune"):
        mm.matmul(k, torch.randn(16, 16), b)
        mm.matmul(k, torch.randn(200, 16), b)  # another key: measured whole again, not said again
    r = k.last_result
    assert r.evaluations == n and k.stats["evaluations"] == 2 * n
    assert tuple(r.winner.config[n] for n in names) == listed[-1]
    said = [m for m in caplog.messages if "below its list" in m]
    assert len(said) == 1 and f"budget=2 is below its list of {n} configs" in said[0]
    assert f"budget={n + 2} would also search 2 beyond it" in said[0]


@interpreted
def test_beyond_measures_each_list_whole_then_that_many_more_in_the_grown_space(tmp_path: Path):
    """`beyond=N` (one setting for lists of every length, as `patch_triton` needs): a key measures
    its whole list, then N configs beyond it, in the space grown as a budget grows it; it
    excludes `budget=`, and a count that is not an int >= 0 is refused, both before any launch."""
    def t(cfg):  # best outside the list, as in the budget test above
        return 1.0 + (cfg["BLOCK_SIZE_N"] != 32) + (cfg["BLOCK_SIZE_K"] != 16) + 0.5 * (cfg["num_stages"] != 2) \
            + 0.1 * (cfg["BLOCK_SIZE_M"] != 32) + 0.01 * (cfg["num_warps"] != 4)
    k = mm.make(store=tmp_path / "s.sqlite", timer=Timer(t), beyond=21)
    assert k.space.fingerprint() == mm.make(store=":memory:", budget=16).space.fingerprint()  # grown alike
    mm.matmul(k, torch.randn(16, 16), torch.randn(16, 16))
    r = k.last_result
    names = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps", "num_stages")
    listed = {tuple(config_dict(c)[n] for n in names) for c in mm.CONFIGS}
    assert r.evaluations == len(mm.CONFIGS) + 21 and k.stats["beyond_list"] >= 1
    assert r.baselines["configs"] is not None  # the whole list measured, reported beside
    assert tuple(r.winner.config[n] for n in names) not in listed  # the winner is beyond the list
    with pytest.raises(AbductuneError, match="budget= or beyond=, not both"):
        mm.make(store=":memory:", budget=8, beyond=4)
    with pytest.raises(AbductuneError, match="beyond= is a count"):
        mm.make(store=":memory:", beyond=-1)
    with pytest.raises(AbductuneError, match="budget= or beyond=, not both"):
        abductune.patch_triton(budget=8, beyond=4)


@interpreted
def test_record_mode_times_every_config_in_full(tmp_path: Path, monkeypatch):
    from abductune.autotune import evaluation
    from abductune.problem import Problem

    probe = lambda c, la: 1.0  # noqa: E731
    monkeypatch.setattr(evaluation, "timers", lambda tuner: (probe, probe, probe, probe))
    p = Problem("softmax_kernel", "row_reduction", {"n_cols": 16}, {"x": "fp32"})
    tuning = abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], store=":memory:")(sm.softmax_kernel)
    assert evaluation.call_evaluator(tuning, p, (), {}, {}, {}).probe_timer is probe  # a tune races
    recording = abductune.autotune(configs=sm.CONFIGS, key=["n_cols"], store=":memory:",
                                   record=tmp_path / "rec")(sm.softmax_kernel)
    assert evaluation.call_evaluator(recording, p, (), {}, {}, {}).probe_timer is None
