"""Data-parallel training on the CPU: scripts/train.py in two processes (gloo, in the environment
torchrun gives each process), each reading its half of every global batch, must end with the
weights of one process trained on the whole global batch, also when the two-process run stops
half-way and resumes from its checkpoint; modelfile.py exports that checkpoint with its recipe.
The processes leave their group without deadlock; a process that stalls makes the other fail
within --dist-timeout."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import torch  # noqa: E402

import modelfile  # noqa: E402
from model import Config, Model  # noqa: E402

DATA = os.environ.get("LINGEN_DATA", os.path.join(ROOT, "data"))
TINY = dict(n_layers=2, n_heads=4, d_head=8, d_ff=64, n_mix=3)
# 24 images, global batch 8: the 4 steps cross into a second epoch (a second permutation).
# A constant lr, RAdam and per-tensor clipping at 0.5 (which clips here) act on the averaged gradients.
RECIPE = ["--tiny", "--device", "cpu", "--dataset", "mnist", "--limit", "24", "--lr", "0.05", "--ema", "0",
          "--dropout", "0", "--schedule", "constant", "--optimizer", "radam", "--clip", "0.5",
          "--clip-mode", "per-tensor", "--final-eval", "4", "--no-f32-check", "--export-dtype", "f32",
          "--dist-timeout", "2"]
STEPS = 4
DEADLINE = 300   # seconds a launch may take: a loaded machine stretches seconds into minutes
# sitecustomize.py for a process whose clock, as train.py reads it (time.time() called from
# __main__), runs a million times fast; PyTorch's own timeouts keep the real clock
FAST_CLOCK = """import sys
import time
_real, _t0 = time.time, time.time()


def _fast():
    t = _real()
    return _t0 + (t - _t0) * 1e6 if sys._getframe(1).f_globals.get("__name__") == "__main__" else t


time.time = _fast
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(world, args, folder, rank_env=None):
    """train.py ARGS in `world` processes, as torchrun would start them, each writing to
    folder/rank{r}.txt; rank_env: {rank: more environment variables}. -> the processes"""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": str(world)}
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only: CI may have no other network
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "train.py"), *args]
    procs = []
    for r in range(world):
        with open(os.path.join(folder, f"rank{r}.txt"), "w") as out:
            procs.append(subprocess.Popen(cmd, env={**env, "RANK": str(r), "LOCAL_RANK": str(r),
                                                    **(rank_env or {}).get(r, {})},
                                          stdout=out, stderr=subprocess.STDOUT))
    return procs


def outputs(folder, world):
    """What each process wrote, its last 3000 characters, one block per rank."""
    texts = []
    for r in range(world):
        with open(os.path.join(folder, f"rank{r}.txt")) as f:
            texts.append(f"--- rank {r}:\n{f.read()[-3000:]}")
    return "\n".join(texts)


def train(world, batch, steps, out, extra=(), rank_env=None):
    """Run train.py in `world` processes (rank_env: as start's); fail on any error, or when
    they run longer than DEADLINE (then they are killed)."""
    args = [*RECIPE, "--data", DATA, "--batch", str(batch), "--steps", str(steps), "--export", out, *extra]
    with tempfile.TemporaryDirectory() as d:
        procs = start(world, args, d, rank_env)
        try:  # a process that fails leaves the others waiting for it: stop at the first failure
            deadline = time.time() + DEADLINE
            while any(p.poll() is None for p in procs) and not any(p.poll() for p in procs):
                if time.time() > deadline:
                    raise AssertionError(f"{world} training processes still running after {DEADLINE} s:\n"
                                         + outputs(d, world))
                time.sleep(0.1)
        finally:
            failed = [r for r, p in enumerate(procs) if p.poll()]  # before the others are stopped
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if failed:
            raise AssertionError(f"rank {failed[0]} of {world} exited with {procs[failed[0]].returncode}:\n"
                                 + outputs(d, world))


class DataParallel(unittest.TestCase):
    def test_two_processes_equal_one_with_the_global_batch(self):
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        with tempfile.TemporaryDirectory() as d:
            one, two, ckpt, log = (os.path.join(d, n) for n in ("one.bin", "two.bin", "two.pt", "two.jsonl"))
            train(1, 8, STEPS, one)
            train(2, 4, STEPS // 2, two, ["--ckpt", ckpt])   # stops half-way,
            train(2, 4, STEPS, two, ["--ckpt", ckpt, "--log", log])   # resumes
            m1, meta1 = modelfile.load(one)
            m2, meta2 = modelfile.load(two)
            w1, w2 = m1.state_dict(), m2.state_dict()
            diff = max((w1[k] - w2[k]).abs().max().item() for k in w1)
            self.assertLess(diff, 1e-5)
            # the comparison has something to see: training moved the weights from their start
            torch.manual_seed(0)
            w0 = Model(Config(**{**m1.cfg.as_dict(), **TINY})).state_dict()
            self.assertGreater(max((w1[k] - w0[k]).abs().max().item() for k in w1), 1e-3)
            # the metadata states the global batch and the learning rate; one process logs
            self.assertEqual((meta2["batch"], meta2["processes"], meta2["lr"]), ("8", "2", "0.05"))
            self.assertIn("batch 8 (2 processes x 4)", meta2["recipe"])
            self.assertEqual((meta1["batch"], meta1["processes"]), ("8", "1"))
            with open(log) as f:
                recs = [json.loads(line) for line in f]
            self.assertEqual([r["step"] for r in recs if "step" in r], [3, 4])  # the resumed run's steps
            self.assertEqual(sum(1 for r in recs if r.get("final")), 1)
            # the checkpoint, exported by modelfile.py: the same raw weights, with their recipe
            ck = os.path.join(d, "ckpt.bin")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "modelfile.py"), ckpt, ck, "--dtype", "f32"],
                           check=True, capture_output=True, timeout=DEADLINE)
            m3, meta3 = modelfile.load(ck)
            self.assertTrue(all(torch.equal(v, m3.state_dict()[k]) for k, v in w2.items()))
            self.assertEqual((meta3["steps"], meta3["batch"], meta3["recipe"]), ("4", "8", meta2["recipe"]))

    def test_rank_0s_clock_decides(self):
        # rank 1's clock runs a million times fast: by its own clock its budget is spent after
        # its first timed step (the fourth), where a schedule in time (wsd over --minutes) is
        # down to a learning rate of 0, and its copy of the weights would part from rank 0's.
        # The learning rate follows rank 0's clock, so the run still trains as one process
        # with the global batch, at the constant part of the schedule
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        wsd = ["--schedule", "wsd", "--warmup", "0", "--decay", "0.5", "--minutes", "10"]
        steps = 6   # two epochs
        with tempfile.TemporaryDirectory() as d:
            fast = os.path.join(d, "fast")
            os.mkdir(fast)
            with open(os.path.join(fast, "sitecustomize.py"), "w") as f:
                f.write(FAST_CLOCK)
            one, two = os.path.join(d, "one.bin"), os.path.join(d, "two.bin")
            train(1, 8, steps, one, wsd)
            train(2, 4, steps, two, wsd, {1: {"PYTHONPATH": fast}})
            w1, w2 = modelfile.load(one)[0].state_dict(), modelfile.load(two)[0].state_dict()
            self.assertLess(max((w1[k] - w2[k]).abs().max().item() for k in w1), 1e-5)


class Leave(unittest.TestCase):
    def test_the_group_is_taken_down_without_deadlock(self):
        # train.leave, 50 times in a row in two processes (ddp_leave.py). The last holder of a
        # gloo group destroys it; had DistributedDataParallel's reducer been the last, it would
        # have waited for the group's threads holding Python's lock, which a thread may need to
        # free the tensor of the collective it has just run: a deadlock, within a few dozen
        # teardowns on a busy machine
        with tempfile.TemporaryDirectory() as d:
            env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo")}
            procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "ddp_leave.py"), d, "50"],
                                      env={**env, "RANK": str(r)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True) for r in range(2)]
            try:
                outs = [p.communicate(timeout=DEADLINE)[0] for p in procs]
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
        for r, (p, out) in enumerate(zip(procs, outs)):
            self.assertEqual((p.returncode, out.strip().splitlines()[-1:]), (0, ["left 50 groups"]), f"rank {r}:\n{out}")


class Stall(unittest.TestCase):
    def test_a_stalled_process_fails_the_other_within_the_timeout(self):
        # rank 1 stopped (SIGSTOP) mid-run: rank 0 waits in its next collective for --dist-timeout
        # (0.2 minutes), then exits with 1, naming itself and the timeout (without the option,
        # PyTorch's default would keep it waiting for 30 minutes)
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        args = [*RECIPE, "--data", DATA, "--batch", "4", "--steps", "1000000", "--dist-timeout", "0.2"]
        with tempfile.TemporaryDirectory() as d:
            procs = start(2, args, d)
            try:
                deadline = time.time() + DEADLINE
                while '"step": 2' not in outputs(d, 1):   # both have joined and trained
                    self.assertTrue(all(p.poll() is None for p in procs), outputs(d, 2))
                    self.assertLess(time.time(), deadline, outputs(d, 2))
                    time.sleep(0.05)
                procs[1].send_signal(signal.SIGSTOP)
                stalled = time.time()
                rc = procs[0].wait(timeout=DEADLINE)
                waited = time.time() - stalled
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            text = outputs(d, 1)
        self.assertEqual(rc, 1, text)
        self.assertIn("train.py: process 0 of 2 stops: RuntimeError", text)
        self.assertIn("(--dist-timeout 0.2 minutes)", text)
        self.assertGreater(waited, 0.2 * 60 - 1, text)   # it waited for the timeout, no less
        self.assertLess(waited, DEADLINE / 2, text)


if __name__ == "__main__":
    unittest.main()
