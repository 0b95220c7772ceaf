"""Crash safety: a process recording a long capture is killed with SIGKILL at 20 random moments.
Every trace opens, and every chunk the process had flushed before the kill (it logs its
recorder's chunk and step counts after each compile) reads back intact.

The recording processes are forked from a server that imported torch and dynview once (and ran
nothing else), instead of each being a new interpreter: the import is most of a fresh process's
cost and none of what is tested (the recording is started in the killed process, after the fork)."""
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

import dynview
from test_cli_disasm import cli

pytestmark = pytest.mark.main_interpreter_only  # (conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Reads "PATH LOG" lines; for each forks a child that records a long capture into PATH until it is
# killed, and answers "pid N" at the fork, "ready" once the child records, "dead S" when it is reaped.
SERVER = r'''
import os, sys, torch, dynview


def record(path, log):
    rec = dynview.record(path, flush_ms=100, chunk_steps=1024).start()
    print("ready", flush=True)
    logf = open(log, "w")
    i = 0
    while True:
        # a long capture: distinct functions with unrolled loops and helper calls
        src = "def helper(t):\n    return t.sin() * 2 + t.cos()\n"
        src += "def f%d(x, y):\n    z = x\n    for k in range(%d):\n        z = helper(z) * y + k\n    return z\n" % (i, 40 + i % 30)
        ns = {}
        exec(compile(src, "gen_%d.py" % i, "exec"), ns)
        dynview.compile(ns["f%d" % i], backend="eager")(torch.ones(4), torch.ones(4))
        s = dynview._C._record_stats()
        logf.write("%d %d\n" % (s["chunks"], s["steps"]))
        logf.flush()
        i += 1


for line in sys.stdin:
    path, log = line.split()
    pid = os.fork()
    if pid == 0:
        try:
            record(path, log)
        finally:
            os._exit(1)
    print("pid", pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print("dead", status, flush=True)
'''


def start_server():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.Popen([sys.executable, "-c", SERVER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def one_kill(server, child, tmp, k, rng, results):
    path, log = os.path.join(tmp, f"kill{k}.dyn"), os.path.join(tmp, f"kill{k}.log")
    server.stdin.write(f"{path} {log}\n")
    server.stdin.flush()
    kind, pid = server.stdout.readline().split()
    assert kind == "pid"
    child[0] = int(pid)
    assert server.stdout.readline().strip() == "ready"
    delay = rng.uniform(0.05, 1.5)
    time.sleep(delay)
    os.kill(child[0], signal.SIGKILL)
    kind, status = server.stdout.readline().split()
    child[0] = None
    assert kind == "dead" and os.WIFSIGNALED(int(status)) and os.WTERMSIG(int(status)) == signal.SIGKILL
    lines = open(log).read().split("\n") if os.path.exists(log) else []
    logged = [tuple(map(int, l.split())) for l in lines if l.strip()]
    chunks_logged, steps_logged = logged[-1] if logged else (0, 0)
    t = dynview.load_trace(path)  # must open
    steps = t.steps                # every chunk decodes
    # a killed recording has no footer: check refuses it (exit 2), and checks its readable part on request
    assert subprocess.run([cli(), "check", path], capture_output=True, timeout=60).returncode == 2
    assert subprocess.run([cli(), "check", path, "--allow-incomplete"], capture_output=True, timeout=60).returncode == 0
    results.append((k, delay, chunks_logged, steps_logged, len(t.chunks), t.num_steps, len(steps), t.problems))


# 20 kills on the main interpreter; 8 on the others' runs (DV_SECONDARY_RUN=1, .ci/other_pythons.sh):
# the recorder is the same C++ there, and the 20 take 40 s of each run.
KILLS = 8 if os.environ.get("DV_SECONDARY_RUN") == "1" else 20


def test_sigkill_at_random_moments(tmp_path, report):
    rng = random.Random(1234)
    results, errors = [], []

    def worker(ks):
        server, child = start_server(), [None]
        try:
            for k in ks:
                one_kill(server, child, str(tmp_path), k, random.Random(rng.random() + k), results)
        except Exception as e:  # surfaced below with the kill number
            errors.append((k, repr(e)))
        finally:
            if child[0] is not None:  # a failed kill: the child would record forever
                try:
                    os.kill(child[0], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            server.stdin.close()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()

    threads = [threading.Thread(target=worker, args=(range(i, KILLS, 2),)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(results) == KILLS
    for k, delay, chunks_logged, steps_logged, chunks, num_steps, nsteps, problems in sorted(results):
        assert chunks >= chunks_logged, (k, delay, chunks_logged, chunks, problems)
        assert num_steps >= steps_logged and nsteps == num_steps, (k, delay)
    with_data = sum(1 for r in results if r[2] > 0)
    assert with_data >= KILLS // 2  # most kills happen after some compiles were flushed
    report(f"SIGKILL x{KILLS}: every trace opened; flushed chunks logged before the kill all read back "
           f"({sum(r[4] for r in results)} chunks, {sum(r[5] for r in results)} steps in total; "
           f"{sum(1 for r in results if r[7])} traces had a torn tail, reported as a problem)")
