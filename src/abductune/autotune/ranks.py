"""Rank agreement across machines: the ranks of one torch.distributed job agree on each key through
the job's c10d key-value store (one rank claims and tunes it, the others wait for its winner, record
it in their own store and measure nothing). No collective call: a rank that never meets a key never
takes part, so ranks may meet keys at different times and in different orders."""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import sys
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import AbductuneError
from ..measurement import KINDS, Measurement
from ..store import Context, Store

log = logging.getLogger(__name__)

ENV = "ABDUCTUNE_RANK_AGREEMENT"
MODES = ("auto", "file", "dist", "off")
PREFIX = "abductune"

_OVERRIDE: list[Any] = []  # a key-value store set by set_rank_store, used instead of the job's


def agreement_mode() -> str:
    """$ABDUCTUNE_RANK_AGREEMENT: "auto" (default: the job's c10d store when torch.distributed is
    initialised with more than one rank, on top of the store file's claim), "file" (the store
    file's claim only: ranks on other machines tune on their own), "dist" (the c10d store
    always; a key tuned before init_process_group is an error) or "off" (no claim at all)."""
    v = os.environ.get(ENV, "").strip().lower() or "auto"
    if v not in MODES:
        raise AbductuneError(f"{ENV}={os.environ.get(ENV)!r}: use one of {', '.join(MODES)} "
                             "(auto is the default; see docs/FLEET.md, rank agreement)")
    return v


def set_rank_store(kv: Any = None) -> None:
    """Agree through `kv` (a torch.distributed Store, or anything with `add`, `set`, `get` and
    `check`) instead of the default process group's store: a job that made its own TCPStore or
    agrees within a subgroup. None goes back to the default."""
    _OVERRIDE.clear()
    if kv is not None:
        _OVERRIDE.append(kv)


def job_store(mode: str) -> tuple[Any, str] | None:
    """(the key-value store the ranks agree through, this rank's name), or None where there is
    none to use (mode "file" or "off"; in "auto", no process group of two or more ranks)."""
    if mode in ("file", "off"):
        return None
    me = f"pid {os.getpid()} on {socket.gethostname()}"
    if _OVERRIDE:
        return _OVERRIDE[0], me
    dist = sys.modules.get("torch.distributed")  # never imported here: no torch, no process group
    up = dist is not None and dist.is_available() and dist.is_initialized()
    if not up:
        if mode == "dist":
            raise AbductuneError(f"{ENV}=dist but torch.distributed is not initialised when a key is tuned; "
                                 "call torch.distributed.init_process_group before the first tuned call, "
                                 f"or set {ENV}=auto")
        return None
    world = dist.get_world_size()
    if mode == "auto" and world <= 1:
        return None
    from torch.distributed.distributed_c10d import _get_default_store  # the PG's rendezvous store

    return _get_default_store(), f"rank {dist.get_rank()}/{world} ({me})"


def rank_key(ctx: Context, tune_key: str, budget: Any, implementations: Sequence[str] = (),
             record: bool = False) -> str:
    """The store key of one tune: the context's whole identity (kernel, source hash, space
    fingerprint, key dims and dtypes, device, toolchain), so ranks on different GPU types or
    Triton versions never share a winner, and what else makes two tunes differ (strategy and
    options, budget, competing implementations, record mode)."""
    blob = json.dumps([list(ctx.identity), tune_key, getattr(budget, "evaluations", None),
                       getattr(budget, "seconds", None), sorted(implementations), bool(record)])
    return f"{PREFIX}/{ctx.kernel}/{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


# ----------------------------------------------------------------------------- the claim

@contextlib.contextmanager
def across_ranks(tuner: Any, store: Store, ctx: Context, budget: Any, stored: Callable[[], bool] | None,
                 mode: str) -> Iterator[None]:
    """Around a tune whose store file holds no winner: the first rank of the job to claim the key
    tunes it and publishes its winner; another rank waits for that winner (up to the tuner's
    `wait_timeout_s`), records it in its own store and yields, so the tune reads it from there.
    A claimer that died (its winner never comes) or a store that cannot be reached: this rank
    tunes here, with a warning."""
    job = job_store(mode)
    if job is None or (stored is not None and stored()):
        yield
        return
    kv, me = job
    base = rank_key(ctx, tuner._tune_key(), budget, list(tuner.implementations), tuner.record is not None)
    try:
        first = int(kv.add(f"{base}/claim", 1)) == 1
        if first:
            kv.set(f"{base}/claimer", me)
    except Exception as e:  # noqa: BLE001 - an unreachable store must not stop the program
        log.warning("%s: the job's store could not be reached to agree on this key (%s); tuning here",
                    tuner.name, e)
        yield
        return
    if not first:
        got = _wait(tuner, kv, base)
        if got is not None and "rows" in got:
            record(store, ctx, got, base)
            yield
            return
        if got is not None:
            log.info("%s: %s could not tune this key (%s); tuning here", tuner.name, got.get("from"),
                     got.get("failed"))
    try:
        yield
    finally:
        # the claimer always publishes (a failed tune too, so nobody waits for it); a rank that
        # tuned after waiting publishes only where nothing is there yet, for ranks still to come
        try:
            if first or not kv.check([f"{base}/winner"]):
                kv.set(f"{base}/winner", json.dumps(payload(tuner, store, ctx, me)))
        except Exception as e:  # noqa: BLE001 - the waiting ranks time out and tune on their own
            log.warning("%s: could not publish this key's winner to the other ranks (%s)", tuner.name, e)


def _wait(tuner: Any, kv: Any, base: str) -> dict[str, Any] | None:
    """The winner another rank published for `base`, or None after `wait_timeout_s` (its claimer
    died or is still tuning) or when the store cannot be reached."""
    t0 = time.perf_counter()
    seen = {"told": False, "who": "another rank"}

    def waiting() -> None:
        if not seen["told"] or seen["who"] == "another rank":  # the claimer names itself right after its claim
            if kv.check([f"{base}/claimer"]):
                seen["who"] = _text(kv.get(f"{base}/claimer"))
        if not seen["told"]:
            log.info("%s: %s of this job is tuning this key; waiting for its winner", tuner.name, seen["who"])
            seen["told"] = True
    try:
        if not wait_until(lambda: bool(kv.check([f"{base}/winner"])), tuner.wait_timeout_s, waiting):
            log.warning("%s: waited %.0fs for %s tuning this key; tuning here", tuner.name,
                        tuner.wait_timeout_s, seen["who"])
            return None
        return json.loads(_text(kv.get(f"{base}/winner")))
    except Exception as e:  # noqa: BLE001 - the store (the rank hosting it) went away
        log.warning("%s: lost the job's store while waiting for another rank's winner (%s); tuning here",
                    tuner.name, e)
        return None
    finally:
        tuner.stats["waited_s"] += time.perf_counter() - t0


def wait_until(ready: Callable[[], bool], timeout_s: float, waiting: Callable[[], None]) -> bool:
    """Poll `ready` (20 ms, doubling to 0.5 s), calling `waiting()` before each pause, until it
    is true (True) or `timeout_s` has passed (False). The wait of both claims: the store file's
    (keys.tuning_lock, processes of one machine) and the job's (ranks of several)."""
    t0 = time.perf_counter()
    delay = 0.02
    while not ready():
        if time.perf_counter() - t0 > timeout_s:
            return False
        waiting()
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    return True


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


# ----------------------------------------------------------------------------- the winner

def payload(tuner: Any, store: Store, ctx: Context, me: str) -> dict[str, Any]:
    """What a rank that tuned publishes: every row its store holds for the context (with its kind
    and run, which `pick` reads) and which of them is the winner; or why there is none."""
    from .choices import pick

    runs = [r for r in store.runs(ctx) if r.status == "done" and r.winner_id is not None]
    tk = tuner._tune_key()
    src = ([r for r in runs if r.tune_key == tk] or [r for r in runs if r.strategy == "import"] or [None])[-1]
    if src is None:
        return {"from": me, "failed": "no finished tune"}
    rows = store.measurements(ctx)
    at = next((i for i, m in enumerate(rows) if m.id == src.winner_id), None)
    if at is None or pick(rows[at], rows, tuner.implementations)[0] is None:
        return {"from": me, "failed": "no config ran"}
    return {"from": me, "winner": at,
            "rows": [{**m.to_dict(), "kind": m.kind, "run": m.run_id} for m in rows]}


def record(store: Store, ctx: Context, got: Mapping[str, Any], base: str) -> None:
    """Another rank's winner into this store, as an import: one finished run per run it came from
    (so a run-off stays one run, as `pick` reads it), the last naming the winner. A later process
    on this machine reads it as any stored winner."""
    rows = list(got["rows"])
    order = sorted({r.get("run") for r in rows}, key=lambda r: -1 if r is None else r)
    options = {"from": got.get("from", ""), "rank_agreement": base}
    ids: dict[int, int] = {}
    runs = []
    for g in order:
        at = [i for i, r in enumerate(rows) if r.get("run") == g]
        rid = store.start_run(ctx, "import", options, tune_key="import")
        ms = [Measurement.from_dict(rows[i]).replace(kind=rows[i]["kind"] if rows[i].get("kind") in KINDS
                                                     else "import") for i in at]
        ids.update({i: m.id for i, m in zip(at, store.put_many(ctx, ms, run_id=rid))})
        runs.append(rid)
    for rid in runs:
        last = rid == runs[-1]
        store.finish_run(rid, "done", winner_id=ids[int(got["winner"])] if last else None,
                         summary={"imported_from": got.get("from", "")} if last else None)
    log.info("%s: recorded the winner of %s in %s", ctx.kernel, got.get("from", "another rank"), store.path)
