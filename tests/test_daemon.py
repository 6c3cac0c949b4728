"""The daemon (`abductune daemon`): which commands it takes, that a forwarded command behaves
as a local one (output, exit code, files relative to the caller's folder), cancel, stop, a
stale socket, idle exit. On the CPU the daemon has no GPU workers and `tune` replays."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from abductune import daemon
from abductune.daemon import base, server

EXE = [sys.executable, "-m", "abductune.cli"]
SHAPE = "rows=4096,cols=32000"


@pytest.fixture
def rt(tmp_path, monkeypatch):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("ABDUCTUNE_RUNTIME_DIR", str(d))
    monkeypatch.delenv("ABDUCTUNE_DAEMON", raising=False)
    yield d
    daemon.stop(every=True)


def cli(*args, cwd=None, env=None, timeout=120):
    return subprocess.run([*EXE, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, **(env or {})})


def winner_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("#")]


def test_fingerprint_follows_worker_settings_not_the_store(monkeypatch):
    base = daemon.fingerprint()
    monkeypatch.setenv("ABDUCTUNE_STORE", "/somewhere/else.sqlite")
    assert daemon.fingerprint() == base  # read per command: the request carries it
    monkeypatch.setenv("TRITON_CACHE_DIR", "/another/cache")
    assert daemon.fingerprint() != base  # fixed in the workers at their start


def test_forwardable_only_tune_without_user_kernels(monkeypatch):
    monkeypatch.delenv("ABDUCTUNE_DAEMON", raising=False)
    assert daemon.forwardable(["tune"])
    assert daemon.forwardable(["-v", "tune", "--kernel", "softmax_fp16"])
    assert not daemon.forwardable(["replay", "bundled"])
    assert not daemon.forwardable(["tune", "--no-daemon"])
    assert not daemon.forwardable(["tune", "--mode", "replay"])
    assert not daemon.forwardable(["tune", "--kernel=mymod:MyKernel"])
    assert not daemon.forwardable(["tune", "--help"])
    monkeypatch.setenv("ABDUCTUNE_DAEMON", "0")
    assert not daemon.forwardable(["tune"])


def test_runtime_dir_must_be_private(tmp_path, monkeypatch):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    monkeypatch.setenv("ABDUCTUNE_RUNTIME_DIR", str(d))
    with pytest.raises(daemon.DaemonError, match="not private"):
        daemon.runtime_dir()


def test_run_request_relays_output_restores_state_and_cancels(tmp_path, monkeypatch):
    """In-process: output frames in order, the exit code, cwd and ABDUCTUNE_STORE restored;
    a cancel frame interrupts the command and reports 130."""
    monkeypatch.setenv("ABDUCTUNE_STORE", "daemon-own")
    here = os.getcwd()
    seen = {}

    def ok(argv, req):
        print("hello", argv[0])
        print("oops", file=sys.stderr)
        seen["cwd"], seen["store"] = os.getcwd(), os.environ.get("ABDUCTUNE_STORE")
        return 3

    a, b = socket.socketpair()
    req = {"argv": ["x"], "cwd": str(tmp_path), "env": {"ABDUCTUNE_STORE": "client.sqlite"}}
    assert server.run_request(a, req, run=ok) == 3
    frames = []
    b.settimeout(5)
    while (f := base.recv_frame(b)) is not None:
        frames.append(f)
        if f[0] == base.EXIT:
            break
    assert frames[-1] == (b"x", b"3")
    assert b"".join(body for kind, body in frames if kind == b"o") == b"hello x\n"
    assert b"".join(body for kind, body in frames if kind == b"e") == b"oops\n"
    assert seen == {"cwd": str(tmp_path), "store": "client.sqlite"}
    assert os.getcwd() == here and os.environ["ABDUCTUNE_STORE"] == "daemon-own"
    a.close()
    b.close()

    reset = []
    monkeypatch.setattr(server, "_reset_workers", lambda: reset.append(1))

    def slow(argv, req):
        time.sleep(30)
        return 0

    a, b = socket.socketpair()
    threading.Timer(0.3, lambda: base.send_frame(b, base.CANCEL, b"")).start()
    t0 = time.monotonic()
    assert server.run_request(a, {"argv": ["x"]}, run=slow) == 130
    assert time.monotonic() - t0 < 10 and reset == [1]  # workers restarted after a cancel
    b.settimeout(5)
    assert base.recv_frame(b) == (base.EXIT, b"130")
    a.close()
    b.close()


def test_forwarded_tune_matches_a_local_run(rt, tmp_path):
    r = cli("daemon", "start", "--idle-minutes", "5")
    assert r.returncode == 0, r.stderr
    assert "daemon ready" in r.stdout
    info = daemon.status()[0]
    assert info["alive"] and info["serves_here"]
    work = tmp_path / "work"
    work.mkdir()
    args = ("tune", "--kernel", "softmax_fp16", "--shapes", SHAPE, "--budget", "6", "--json", "out.json")
    via = cli(*args, cwd=work)
    assert via.returncode == 0, via.stderr
    assert f"running in the abductune daemon, pid {info['pid']}" in via.stderr
    # the relative --json path is the caller's, not the daemon's
    assert json.loads((work / "out.json").read_text())[0]["kernel"] == "softmax_fp16"
    local = cli(*args[:-2], "--no-daemon", cwd=work)
    assert local.returncode == 0 and "running in the abductune daemon" not in local.stderr
    assert winner_lines(via.stdout) == winner_lines(local.stdout) and winner_lines(via.stdout)
    # a user's mistake: the same one-line error and exit code 2 as locally
    bad = cli("tune", "--kernel", "nope_fp16")
    assert bad.returncode == 2 and "error: unknown kernel(s) nope_fp16" in bad.stderr
    assert daemon.status()[0]["served"] == 2


def other_name_of_this_python(tmp_path):
    """Another path that runs this very environment's interpreter: a sibling name in its bin
    folder (python / python3 / python3.X), else, outside a virtual environment, a symlink.
    (A symlink to a venv's python placed elsewhere runs the base interpreter, not the venv.)"""
    here = Path(sys.executable)
    for name in ("python", "python3", f"python3.{sys.version_info.minor}"):
        other = here.parent / name
        if other != here and other.exists() and os.path.realpath(other) == os.path.realpath(here):
            return other
    if sys.prefix != sys.base_prefix:
        pytest.skip("this virtual environment has one name for its python")
    link = tmp_path / "python-link"
    link.symlink_to(sys.executable)
    return link


def test_the_console_entry_forwards_before_importing_the_command_line(rt, tmp_path):
    """`python -m abductune` (the console script's entry) sends a served `tune` to the daemon
    without importing click, rich or numpy, through another name of the interpreter too (a
    console script's `python3.11` and a user's `python3` are one environment); a command
    the daemon does not take runs locally as usual."""
    assert cli("daemon", "start").returncode == 0
    pid = daemon.status()[0]["pid"]
    link = other_name_of_this_python(tmp_path)
    r = subprocess.run([str(link), "-X", "importtime", "-m", "abductune", "tune", "--kernel", "gelu_mul_fp16",
                        "--budget", "4"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"running in the abductune daemon, pid {pid}" in r.stderr
    imported = {ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
    assert "abductune.daemon.client" in imported
    assert not imported & {"click", "rich", "numpy", "abductune.cli"}, imported & {"click", "rich", "numpy"}
    assert winner_lines(r.stdout)
    local = subprocess.run([sys.executable, "-m", "abductune", "tune", "--kernel", "gelu_mul_fp16", "--budget", "4",
                            "--no-daemon"], capture_output=True, text=True, timeout=120)
    assert local.returncode == 0 and "running in the abductune daemon" not in local.stderr
    assert winner_lines(local.stdout) == winner_lines(r.stdout)
    usage = subprocess.run([sys.executable, "-m", "abductune", "tune", "--no-daemon", "--budget", "x"],
                           capture_output=True, text=True, timeout=60)  # click's errors, named `abductune`
    assert usage.returncode == 2 and usage.stderr.startswith("error:") and "abductune tune --help" in usage.stderr


def test_cancel_stop_and_stale_socket(rt):
    assert cli("daemon", "start").returncode == 0
    pid = daemon.status()[0]["pid"]
    p = subprocess.Popen([*EXE, "tune", "--kernel", "matmul_fp16", "--budget", "64", "--full-budget"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60  # cancel once the daemon runs the command, not before
    while (daemon.status()[0].get("state") != "busy" or p.poll() is not None) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the client is waiting on the daemon's replay
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    # the daemon survived the cancel and serves the next command
    nxt = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4")
    assert nxt.returncode == 0 and f"pid {pid}" in nxt.stderr
    # stop: process gone, files gone, commands run locally again
    assert cli("daemon", "stop").stdout.strip() == f"stopped daemon pid {pid}"
    assert not base.alive(pid) and not list(rt.glob("*.sock"))
    loc = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4")
    assert loc.returncode == 0 and "running in the abductune daemon" not in loc.stderr
    # a daemon killed without cleaning up leaves a socket nobody answers: removed, run locally
    assert cli("daemon", "start").returncode == 0
    pid = daemon.status()[0]["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while base.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(rt.glob("*.sock"))
    loc = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4")
    assert loc.returncode == 0 and "running in the abductune daemon" not in loc.stderr
    assert not list(rt.glob("*.sock"))


def test_warm_imports_what_a_command_reaches(tmp_path, monkeypatch):
    """A cancel that lands inside an import ends the daemon, so the warm-up imports every
    module a replayed `tune` reaches: running one afterwards imports nothing of ours."""
    import contextlib
    import io

    from abductune.cli import inprocess

    monkeypatch.setenv("ABDUCTUNE_STORE", str(tmp_path / "s.sqlite"))
    server._import_package()
    before = set(sys.modules)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert inprocess.run_command(["tune", "--kernel", "matmul_fp16", "--budget", "8"]) == 0
    late = sorted(m for m in set(sys.modules) - before if m.startswith("abductune"))
    assert not late, late


def test_idle_daemon_exits_and_cleans_up(rt):
    r = cli("daemon", "start", "--idle-minutes", "0.02")  # 1.2 s
    assert r.returncode == 0, r.stderr
    pid = daemon.status()[0]["pid"]
    deadline = time.monotonic() + 20
    while base.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not base.alive(pid)
    assert not list(rt.glob("*.sock")) and not list(rt.glob("*.json"))
    assert cli("daemon", "status").stdout.strip() == "no daemon"


def test_another_environment_is_not_served(rt):
    assert cli("daemon", "start").returncode == 0
    other = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4", env={"TRITON_CACHE_DIR": str(rt / "tc")})
    assert other.returncode == 0 and "running in the abductune daemon" not in other.stderr
    st = cli("daemon", "status", env={"TRITON_CACHE_DIR": str(rt / "tc")}).stdout
    assert "another environment (differs in: env:TRITON_CACHE_DIR)" in st


def test_a_cancel_inside_an_import_is_noticed(tmp_path, monkeypatch):
    """The daemon stops serving after a cancel that interrupted an import (a half-imported
    module would break every later command); a cancel elsewhere is harmless."""
    (tmp_path / "abductune_interrupted_mod.py").write_text("import signal\nsignal.raise_signal(signal.SIGINT)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    old = signal.signal(signal.SIGINT, server._on_sigint)
    try:
        server._INTERRUPTED_IMPORT.clear()
        with pytest.raises(KeyboardInterrupt):
            import abductune_interrupted_mod  # noqa: F401
        assert server._INTERRUPTED_IMPORT
        server._INTERRUPTED_IMPORT.clear()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert not server._INTERRUPTED_IMPORT
    finally:
        signal.signal(signal.SIGINT, old)
        sys.modules.pop("abductune_interrupted_mod", None)


def test_between_commands_the_worker_frees_its_problem(monkeypatch):
    """release_shared asks a live shared worker to drop the problem's buffers and forgets
    the setup it would replay after a restart; a dead or absent worker is left alone."""
    from abductune.measure import shared

    class Proc:
        def __init__(self, alive):
            self.alive = alive

        def is_alive(self):
            return self.alive

    class Stub:
        def __init__(self, alive):
            self.proc, self.sent, self._setup_msg = Proc(alive), [], {"op": "setup"}

        def request(self, msg, timeout):
            self.sent.append(msg["op"])

    monkeypatch.setattr(shared, "_SHARED", {})
    shared.release_shared()  # nothing started: nothing to do
    w = Stub(True)
    monkeypatch.setattr(shared, "_SHARED", {"worker": w})
    shared.release_shared()
    assert w.sent == ["release"] and w._setup_msg is None
    dead = Stub(False)
    monkeypatch.setattr(shared, "_SHARED", {"worker": dead})
    shared.release_shared()
    assert dead.sent == [] and dead._setup_msg == {"op": "setup"}


def test_a_second_command_waits_says_so_and_can_leave_the_queue(rt, tmp_path):
    """Commands run one at a time: the second says what it waits for; one that leaves the
    queue (Ctrl-C) is never run."""
    assert cli("daemon", "start").returncode == 0
    long = subprocess.Popen([*EXE, "tune", "--kernel", "matmul_fp16", "--budget", "64", "--full-budget"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while (daemon.status()[0].get("state") != "busy") and time.monotonic() < deadline:
        time.sleep(0.05)
    logs = {k: (open(tmp_path / f"{k}.out", "w+"), open(tmp_path / f"{k}.err", "w+")) for k in ("quit", "wait")}
    quitter = subprocess.Popen([*EXE, "tune", "--kernel", "gelu_mul_fp16", "--budget", "4"],
                               stdout=logs["quit"][0], stderr=logs["quit"][1], text=True)
    waiter = subprocess.Popen([*EXE, "tune", "--kernel", "softmax_fp16", "--budget", "4"],
                              stdout=logs["wait"][0], stderr=logs["wait"][1], text=True)
    note = "waiting: the daemon is running another command, `abductune tune --kernel matmul_fp16"
    deadline = time.monotonic() + 30
    while note not in (tmp_path / "quit.err").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert long.poll() is None, "the long command ended before the others queued"
    quitter.send_signal(signal.SIGINT)
    assert quitter.wait(timeout=60) == 130
    long.communicate(timeout=120)
    assert long.returncode == 0 and waiter.wait(timeout=120) == 0
    assert note in (tmp_path / "quit.err").read_text() and note in (tmp_path / "wait.err").read_text()
    assert "softmax_fp16" in (tmp_path / "wait.out").read_text()
    assert "gelu_mul_fp16" not in (tmp_path / "quit.out").read_text()
    log = Path(daemon.status()[0]["log"]).read_text()
    assert "skipped ['tune', '--kernel', 'gelu_mul_fp16'" in log
    assert daemon.status()[0]["served"] == 2
    for f in logs.values():
        f[0].close()
        f[1].close()


def test_tune_daemon_starts_one_when_none_runs(rt):
    """`tune --daemon` (or ABDUCTUNE_DAEMON=auto) starts a daemon and runs in it; the next
    plain `tune` finds it; without the flag nothing is started."""
    plain = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4")
    assert plain.returncode == 0 and not daemon.status()
    first = cli("tune", "--daemon", "--kernel", "gelu_mul_fp16", "--budget", "4")
    assert first.returncode == 0, first.stderr
    assert "starting the abductune daemon" in first.stderr and "running in the abductune daemon" in first.stderr
    (row,) = daemon.status()
    assert row["alive"] and row["served"] == 1
    again = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4")
    assert f"running in the abductune daemon, pid {row['pid']}" in again.stderr
    daemon.stop()
    auto = cli("tune", "--kernel", "gelu_mul_fp16", "--budget", "4", env={"ABDUCTUNE_DAEMON": "auto"})
    assert auto.returncode == 0 and "starting the abductune daemon" in auto.stderr
    assert daemon.status()[0]["alive"]


def test_a_long_log_is_trimmed_when_a_daemon_starts(tmp_path):
    from abductune.daemon import client

    log = tmp_path / "d-x.log"
    lines = [f"line {i:07d} served tune\n".encode() for i in range(60000)]  # about 1.5 MB
    log.write_bytes(b"".join(lines))
    client._trim_log(log)
    text = log.read_bytes()
    assert len(text) <= client.LOG_KEEP_BYTES + 64
    assert text.startswith(b"(earlier lines trimmed)\n") and text.endswith(lines[-1])
    assert text.splitlines()[1] in {ln.rstrip(b"\n") for ln in lines}  # cut at a line start
    small = tmp_path / "small.log"
    small.write_bytes(b"".join(lines[:10]))
    client._trim_log(small)
    assert small.read_bytes() == b"".join(lines[:10])


def test_the_daemon_tip_only_after_a_short_local_live_command(monkeypatch):
    from abductune.cli import output
    from abductune.cli.daemon import daemon_tip

    monkeypatch.delenv("ABDUCTUNE_DAEMON", raising=False)
    assert "abductune daemon start" in daemon_tip("live", 1)
    assert daemon_tip("replay", 1) is None  # nothing to start without a GPU
    assert daemon_tip("live", 27) is None  # the main job: the start is a small part of it
    monkeypatch.setattr(output, "served", True)
    assert daemon_tip("live", 1) is None  # already in a daemon
    monkeypatch.setattr(output, "served", False)
    monkeypatch.setenv("ABDUCTUNE_DAEMON", "0")
    assert daemon_tip("live", 1) is None  # the user has chosen


def test_a_served_command_runs_with_serving_set(rt):
    """The command line sees `output.served` while a client's command runs in the daemon's
    process, printing through consoles of the client's width; its own consoles come back after."""
    seen = []
    from abductune.cli import group, output

    def fake_main(args, prog_name, standalone_mode):
        seen.append((output.served, output.console.width, output.err_console.width))
        return None

    import logging

    saved = output.console, output.err_console, list(logging.getLogger().handlers)
    group.main.main = fake_main  # the group's own method again once this instance attribute goes
    try:
        assert server._run_cli(["tune"], {"tty_out": True, "columns": 97}) == 0
    finally:  # _run_cli takes the daemon's log handler off the root logger
        del group.main.main
        logging.getLogger().handlers[:] = saved[2]
    assert seen == [(True, 97, 97)] and output.served is False
    assert (output.console, output.err_console) == saved[:2]
