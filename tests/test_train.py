"""Tests of scripts/train.py, in one process on the CPU: the order in which the training images
are read, per-tensor gradient clipping, RAdam's decoupled weight decay, the schemes for new
weights, the schedules, checkpoints at half precision, and whole tiny runs resumed from their
checkpoints."""
import argparse
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import torch  # noqa: E402

import train  # noqa: E402
import model as model_module  # noqa: E402
from model import MNIST, Config, Model  # noqa: E402

DATA = os.environ.get("LINGEN_DATA", os.path.join(ROOT, "data"))


class BatchOrder(unittest.TestCase):
    def test_processes_share_every_global_batch(self):
        # 2 processes x 3 rows, 20 images: 3 global batches an epoch (2 images left out of each)
        order = train.BatchOrder(20, 6, True, 0, torch.device("cpu"))
        for epoch in range(3):
            seen = []
            for i in range(3):
                step = epoch * 3 + i
                a, b = order.rows(step, 0, 3), order.rows(step, 1, 3)
                self.assertEqual((len(a), len(b)), (3, 3))
                seen += a.tolist() + b.tolist()
            self.assertEqual(len(set(seen)), 18, epoch)  # no image twice in an epoch
            if epoch == 0:
                first = seen
        self.assertNotEqual(seen, first)  # a new permutation each epoch
        # a function of the step alone: a fresh order (a resumed run) reads the same rows
        self.assertTrue(torch.equal(train.BatchOrder(20, 6, True, 0, torch.device("cpu")).rows(7, 1, 3),
                                    order.rows(7, 1, 3)))

    def test_no_shuffle_reads_the_file_in_order(self):
        order = train.BatchOrder(10, 4, False, 0, torch.device("cpu"))
        rows = [order.rows(s, r, 2).tolist() for s in range(3) for r in range(2)]
        self.assertEqual(rows, [[0, 1], [2, 3], [4, 5], [6, 7], [0, 1], [2, 3]])


class Optimization(unittest.TestCase):
    def test_per_tensor_clipping(self):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.zeros(n)) for n in (5, 7, 3)]
        grads = [torch.randn(5) * 0.1, torch.randn(7) * 10, torch.randn(3) * 3]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        norm = train.clip_gradients(params, 1.0, "per-tensor", need_norm=False)
        self.assertAlmostEqual(norm.item(), torch.cat(grads).norm().item(), places=4)  # before clipping
        for p, g in zip(params, grads):
            q = torch.nn.Parameter(torch.zeros_like(g))
            q.grad = g.clone()
            torch.nn.utils.clip_grad_norm_([q], 1.0)  # each tensor clipped on its own
            self.assertTrue(torch.allclose(p.grad, q.grad, rtol=1e-6, atol=0), (p.grad, q.grad))
        self.assertLess(params[1].grad.norm().item(), 1.0 + 1e-5)
        self.assertTrue(torch.equal(params[0].grad, grads[0]))  # under the limit: untouched

    def test_radam_weight_decay_is_decoupled(self):
        # with zero gradients RAdam's own step is zero, so only the decay moves the weights:
        # by (1 - lr * wd) at every step. Decay added to the gradient (RAdam's weight_decay in
        # PyTorch 1.13) moves them differently once RAdam's variance rectification starts.
        p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
        opt = train.RAdamW([p], lr=0.1, betas=(0.9, 0.999), weight_decay=0.5)
        for _ in range(10):
            p.grad = torch.zeros(3)
            opt.step()
        self.assertTrue(torch.allclose(p.detach(), torch.tensor([1.0, -2.0, 0.5]) * 0.95 ** 10, rtol=1e-6))

    def test_attention_dropout(self):
        # dropout on softmax attention's weights (--attn-dropout): rescaled so that its mean over
        # the masks is the attention without it; in eval mode, or at p = 0, no mask is drawn
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
        plain = model_module.causal_softmax_attention(q, k, v)
        mean = sum(model_module.causal_softmax_attention(q, k, v, dropout=0.5) for _ in range(4000)) / 4000
        self.assertLess((mean - plain).abs().max().item(), 0.1)
        self.assertGreater((model_module.causal_softmax_attention(q, k, v, dropout=0.5) - plain).abs().max().item(), 0.1)
        cfg = Config(**{**MNIST.as_dict(), "attention": "softmax", **train.TINY})
        m, ref = Model(cfg, attn_dropout=0.5), Model(cfg)
        ref.load_state_dict(m.state_dict())
        tok = torch.randint(0, 256, (2, 40))
        m.eval()
        ref.eval()
        with torch.no_grad():
            self.assertTrue(torch.equal(m(tok), ref(tok)))
            m.train()
            self.assertFalse(torch.allclose(m(tok), m(tok)))

    def test_init_schemes(self):
        # new weights as the paper's code has them (nn.Linear's own: U(+-1/sqrt(fan_in)), std
        # 1/sqrt(3 fan_in)) or N(0, 0.02) with zero biases; both through train.py's options
        for scheme in ("normal", "pytorch"):
            a = argparse.Namespace(dropout=0.0, attn_dropout=0.0, chunk=64, mixed_attention=False, init=None, dataset="mnist",
                                   attention="linear", tiny=False, init_scheme=scheme)
            torch.manual_seed(0)
            m, _ = train.build_model(a)
            for name, lin in [("qkv", m.layers[0].attn.qkv), ("ff2", m.layers[3].ff2), ("head", m.head)]:
                w, b, bound = lin.weight.detach(), lin.bias.detach(), lin.weight.shape[1] ** -0.5
                if scheme == "pytorch":
                    self.assertLessEqual(w.abs().max().item(), bound, name)
                    self.assertAlmostEqual(w.std().item(), bound / 3 ** 0.5, delta=0.1 * bound, msg=name)
                    self.assertGreater(b.abs().max().item(), 0.1 * bound, name)
                else:
                    self.assertAlmostEqual(w.std().item(), 0.02, delta=0.002, msg=name)
                    self.assertEqual(b.abs().max().item(), 0.0, name)
            self.assertAlmostEqual(m.emb.weight.std().item(), 1.0, delta=0.05)
        with self.assertRaises(ValueError):
            Model(MNIST, init="xavier")

    def test_schedules(self):
        # over a wall-clock budget of one minute: the decay follows the seconds spent
        a = argparse.Namespace(lr=1e-3, warmup=10, decay=0.5, schedule="wsd", minutes=1.0, total_steps=0)
        self.assertAlmostEqual(train.lr_at(a, 0, 0.0), 1e-4)    # warmup
        self.assertAlmostEqual(train.lr_at(a, 100, 24.0), 1e-3)  # stable
        self.assertAlmostEqual(train.lr_at(a, 100, 45.0), 5e-4)  # half-way down the decay
        a.schedule = "constant"
        self.assertEqual([train.lr_at(a, s, t) for s, t in ((0, 0.0), (100, 45.0))], [1e-3, 1e-3])

    def test_step_schedule(self):
        # over --total-steps 100: warmup 10, constant, then down to 0 over the last 30 steps,
        # lr (100 - s) / 30 at step s; the seconds spent change nothing
        a = argparse.Namespace(lr=1e-3, warmup=10, decay=0.3, schedule="wsd", minutes=1.0, total_steps=100)
        want = [1e-3 * min(1, (s + 1) / 10, (100 - s) / 30) for s in range(100)]
        for elapsed in (0.0, 30.0, 1e6):
            got = [train.lr_at(a, s, elapsed) for s in range(100)]
            for s in range(100):
                self.assertAlmostEqual(got[s], want[s], places=12, msg=(s, elapsed))
        self.assertAlmostEqual(train.lr_at(a, 85, 0.0), 5e-4)
        self.assertGreater(train.lr_at(a, 99, 0.0), 0.0)   # down to 0 at step 100, the run's end
        # a constant rate with a cool-down: no warmup
        a.warmup = 0
        self.assertEqual([train.lr_at(a, s, 0.0) for s in (0, 50, 70)], [1e-3] * 3)


class HalfCheckpoint(unittest.TestCase):
    def test_half_checkpoint_resumes_within_its_rounding(self):
        torch.manual_seed(0)
        model = Model(Config(**{**MNIST.as_dict(), **train.TINY}))
        params = [p for p in model.parameters()]
        opt = train.RAdamW(params, lr=1e-2, betas=(0.9, 0.999), weight_decay=0.01)
        ema = train.Ema(params, 0.9, 1)
        for _ in range(3):   # moments and averages that are not zero
            for p in params:
                p.grad = torch.randn_like(p)
            opt.step()
            ema.update(params, 0.5)
        with tempfile.TemporaryDirectory() as d:
            full, half = os.path.join(d, "full.pt"), os.path.join(d, "half.pt")
            train.save_checkpoint(full, model, opt, ema, 3, 1.0, [], {})
            train.save_checkpoint(half, model, opt, ema, 3, 1.0, [], {}, half=True)
            ck = torch.load(half)
            self.assertLess(os.path.getsize(half), 0.55 * os.path.getsize(full))
            self.assertTrue(all(v.dtype == torch.float16 for v in ck["model"].values() if v.is_floating_point()))
            self.assertTrue(all(v.dtype == torch.float16 for v in ck["ema"]))
            state = [t for s in ck["opt"]["state"].values() for t in s.values() if torch.is_tensor(t) and t.dim()]
            self.assertTrue(state and all(t.dtype == torch.bfloat16 for t in state))
            # resumed into a fresh model and optimizer: float32 again, equal to the saved ones to
            # float16's rounding (weights) and bfloat16's (moments)
            model2 = Model(Config(**{**MNIST.as_dict(), **train.TINY}))
            opt2 = train.RAdamW(list(model2.parameters()), lr=1e-2, betas=(0.9, 0.999), weight_decay=0.01)
            model2.load_state_dict(ck["model"])
            opt2.load_state_dict(ck["opt"])
            for (k, w), w2 in zip(model.state_dict().items(), model2.state_dict().values()):
                self.assertEqual(w2.dtype, w.dtype, k)
                self.assertTrue(torch.allclose(w2, w, rtol=2 ** -10, atol=1e-7), k)
            for p, p2 in zip(params, model2.parameters()):
                for name, v in opt.state[p].items():
                    v2 = opt2.state[p2][name]
                    if torch.is_tensor(v) and v.dim():
                        self.assertEqual(v2.dtype, torch.float32)
                        self.assertTrue(torch.allclose(v2, v, rtol=2 ** -7, atol=0), name)
                        self.assertFalse(torch.equal(v2, v), name)   # it was rounded: the test sees the half path

    def test_rounding_in_memory_is_what_a_resume_reads(self):
        # round_to_half leaves the state a resume from the half checkpoint starts from: weights,
        # averages and moments equal bit for bit, step counts (tensors in PyTorch 1.13 and 2.x,
        # or numbers) untouched, for RAdamW and AdamW alike
        cfg = Config(**{**MNIST.as_dict(), **train.TINY})
        for name in ("radam", "adamw"):
            a = argparse.Namespace(optimizer=name, lr=1e-2, wd=0.01)
            torch.manual_seed(0)
            model = Model(cfg)
            params = list(model.parameters())
            opt, ema = train.make_optimizer(a, params, torch.device("cpu")), train.Ema(params, 0.9, 1)
            for _ in range(3):
                for p in params:
                    p.grad = torch.randn_like(p)
                opt.step()
                ema.update(params, 0.5)
            for state in opt.state.values():   # a count that bfloat16 would round (to 256)
                state["step"] += 254
            before = {k: v.clone() for k, v in model.state_dict().items()}
            steps = [float(s["step"]) for s in opt.state.values()]
            train.round_to_half(model, opt, ema)
            self.assertEqual([float(s["step"]) for s in opt.state.values()], steps, name)
            self.assertFalse(all(torch.equal(v, before[k]) for k, v in model.state_dict().items()), name)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "half.pt")
                train.save_checkpoint(path, model, opt, ema, 3, 1.0, [], {}, half=True)
                ck = torch.load(path)
            model2 = Model(cfg)
            opt2 = train.make_optimizer(a, list(model2.parameters()), torch.device("cpu"))
            model2.load_state_dict(ck["model"])
            opt2.load_state_dict(ck["opt"])
            for (k, w), w2 in zip(model.state_dict().items(), model2.state_dict().values()):
                self.assertTrue(torch.equal(w, w2), (name, k))
            for e, e2 in zip(ema.tensors, ck["ema"]):
                self.assertTrue(torch.equal(e, e2.float()), name)
            for p, p2 in zip(params, model2.parameters()):
                self.assertEqual(opt.state[p].keys(), opt2.state[p2].keys(), name)
                for k, v in opt.state[p].items():
                    v2 = opt2.state[p2][k]
                    self.assertTrue(torch.equal(torch.as_tensor(v), torch.as_tensor(v2)), (name, k))
                    if torch.is_tensor(v):
                        self.assertEqual(v.dtype, v2.dtype, (name, k))


class Usage(unittest.TestCase):
    def test_bad_options_are_usage_errors(self):
        # exit 2 with a message naming the option, before any training
        argv = sys.argv
        try:
            for args in (["--total-steps", "10"],   # no checkpoint for the next stretch
                         ["--ckpt-every", "5"], ["--ckpt-every", "-1", "--ckpt", "run.pt"],
                         ["--total-steps", "-1", "--ckpt", "run.pt"], ["--decay", "1.5"], ["--dist-timeout", "0"],
                         ["--ckpt", os.path.join("no-such-folder", "run.pt")]):
                sys.argv = ["train.py", *args]
                with self.subTest(args=args), contextlib.redirect_stderr(io.StringIO()) as err:
                    with self.assertRaises(SystemExit) as e:
                        train.parse_args()
                    self.assertEqual(e.exception.code, 2)
                    self.assertIn(args[0], err.getvalue().splitlines()[-1])
        finally:
            sys.argv = argv


def run_train(*args):
    """train.py's main() in this process with these arguments; its output goes to the
    exception if it fails."""
    argv, out = sys.argv, io.StringIO()
    sys.argv = ["train.py", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            train.main()
    except (Exception, SystemExit) as e:
        raise AssertionError(f"train.py {' '.join(args)} failed: {e!r}\n{out.getvalue()[-3000:]}")
    finally:
        sys.argv = argv


def assert_same_state(test, one, two):
    """Two checkpoints hold the same training state: weights, averages, optimizer state."""
    for k, v in one["model"].items():
        test.assertTrue(torch.equal(v, two["model"][k]), k)
    test.assertEqual(len(one["ema"]), len(two["ema"]))
    for i, (e, e2) in enumerate(zip(one["ema"], two["ema"])):
        test.assertTrue(torch.equal(e, e2), i)
    test.assertEqual(one["opt"]["param_groups"], two["opt"]["param_groups"])
    for p, state in one["opt"]["state"].items():
        for name, v in state.items():
            test.assertTrue(torch.equal(v, two["opt"]["state"][p][name]), (p, name))


class Resume(unittest.TestCase):
    """A run in stretches (stopped by its budget, then by --steps, each resumed from the
    checkpoint) ends bit for bit where the unbroken run ends: the same weights, averages and
    optimizer state, with dropout, a decaying schedule, and evaluations (which draw random
    numbers and switch the model to eval mode) after every step of the unbroken run only.
    With --ckpt-every 2 too, from half checkpoints, and with a stretch stopped between
    checkpoints, as a killed process stops."""
    TOTAL = 6

    def recipe(self, d, *extra):
        # 24 images, batch 4: the 6 steps read one epoch; lr up over 2 steps, down over the last 3
        return ["--tiny", "--device", "cpu", "--data", DATA, "--limit", "24", "--batch", "4", "--lr", "0.01",
                "--total-steps", str(self.TOTAL), "--warmup", "2", "--decay", "0.5", "--ema", "0.9",
                "--final-eval", "4", "--eval-subset", "4", "--no-f32-check", "--export-dtype", "f32", *extra]

    def unbroken(self, d, name, *extra):
        ckpt = os.path.join(d, name)
        run_train(*self.recipe(d, *extra), "--ckpt", ckpt, "--eval-every", "0")
        return torch.load(ckpt)

    def in_stretches(self, d, *extra):
        ckpt, export, snapshot = (os.path.join(d, n) for n in ("three.pt", "three.bin", "snapshot.bin"))
        args = [*self.recipe(d, *extra), "--ckpt", ckpt, "--export", export, "--snapshot", snapshot, "--eval-every", "100"]
        run_train(*args, "--minutes", "1e-6")   # out of time: stops at its first budget check, after 1 step
        self.assertEqual(torch.load(ckpt)["step"], 1)
        self.assertTrue(os.path.exists(snapshot))
        self.assertFalse(os.path.exists(export))   # only the run's last stretch exports
        run_train(*args, "--steps", "4")
        self.assertEqual(torch.load(ckpt)["step"], 4)
        self.assertFalse(os.path.exists(export))
        run_train(*args)
        self.assertTrue(os.path.exists(export))
        return torch.load(ckpt)

    def between_checkpoints(self, d, *extra):
        """The run in stretches with --ckpt-every 2 (in extra): out of time after step 1, the
        first trains on to step 2; the second, evaluating after every step, stops at step 5,
        between checkpoints, as if killed there: the checkpoint stays at step 4, and the
        third repeats step 5."""
        ckpt = os.path.join(d, "stretches.pt")
        args = [*self.recipe(d, *extra), "--ckpt", ckpt]
        run_train(*args, "--minutes", "1e-6", "--eval-every", "100")
        self.assertEqual(torch.load(ckpt)["step"], 2)
        run_train(*args, "--steps", "5", "--eval-every", "0")
        self.assertEqual(torch.load(ckpt)["step"], 4)
        run_train(*args, "--eval-every", "100")
        return torch.load(ckpt)

    def assert_same_training(self, one, three):
        self.assertEqual((one["step"], three["step"]), (self.TOTAL, self.TOTAL))
        assert_same_state(self, one, three)
        self.assertAlmostEqual(one["opt"]["param_groups"][0]["lr"], 0.01 / 3)   # the last step's, decaying

    def test_linear_with_dropout(self):
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        with tempfile.TemporaryDirectory() as d:
            one = self.unbroken(d, "one.pt", "--dropout", "0.1")
            self.assert_same_training(one, self.in_stretches(d, "--dropout", "0.1"))
            # the comparison sees the dropout: without it the weights differ
            plain = self.unbroken(d, "plain.pt", "--dropout", "0")
            self.assertFalse(all(torch.equal(v, plain["model"][k]) for k, v in one["model"].items()))

    def test_softmax_with_attention_dropout(self):
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        extra = ["--attention", "softmax", "--dropout", "0.1", "--attn-dropout", "0.1", "--optimizer", "radam"]
        with tempfile.TemporaryDirectory() as d:
            self.assert_same_training(self.unbroken(d, "one.pt", *extra), self.in_stretches(d, *extra))

    def test_half_checkpoints_resume_bit_for_bit(self):
        # the state rounded to the half checkpoint at every checkpoint step, in the unbroken
        # run as in the stretches: linear with dropout, softmax with attention dropout too,
        # under AdamW and RAdam
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        for extra in (["--dropout", "0.1"], ["--attention", "softmax", "--dropout", "0.1", "--attn-dropout", "0.1"]):
            for opt in ("adamw", "radam"):
                args = [*extra, "--optimizer", opt, "--ckpt-half", "--ckpt-every", "2"]
                with self.subTest(args=args), tempfile.TemporaryDirectory() as d:
                    one = self.unbroken(d, "one.pt", *args)
                    self.assertEqual(one["model"]["head.weight"].dtype, torch.float16)
                    self.assert_same_training(one, self.between_checkpoints(d, *args))

    def test_full_checkpoints_every_k_steps(self):
        # without --ckpt-half, --ckpt-every moves only where the checkpoints are written: the
        # stretches train as the unbroken run without it, on float32 weights never rounded
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        with tempfile.TemporaryDirectory() as d:
            one = self.unbroken(d, "one.pt", "--dropout", "0.1")
            three = self.between_checkpoints(d, "--dropout", "0.1", "--ckpt-every", "2")
            self.assert_same_training(one, three)
            self.assertFalse(all(torch.equal(v, v.half().float()) for v in three["model"].values()))


class HalfDataParallel(unittest.TestCase):
    def test_every_process_rounds_its_state(self):
        # two processes (test_ddp's launcher): each rounds its own copy of the state at the
        # checkpoint steps, so that the run stopped at step 3 (the checkpoint stays at 2) and
        # resumed ends as the unbroken one; rounded on rank 0 alone, the copies would part
        import test_ddp
        self.assertTrue(os.path.exists(os.path.join(DATA, "mnist")), f"no mnist under {DATA}: set LINGEN_DATA")
        with tempfile.TemporaryDirectory() as d:
            one, two = os.path.join(d, "one.pt"), os.path.join(d, "two.pt")
            half = ["--ckpt-half", "--ckpt-every", "2", "--dropout", "0.1", "--ema", "0.9"]
            test_ddp.train(2, 4, 4, os.path.join(d, "one.bin"), ["--ckpt", one, *half])
            test_ddp.train(2, 4, 3, os.path.join(d, "two.bin"), ["--ckpt", two, *half])
            self.assertEqual(torch.load(two)["step"], 2)
            test_ddp.train(2, 4, 4, os.path.join(d, "two.bin"), ["--ckpt", two, *half])
            a, b = torch.load(one), torch.load(two)
            self.assertEqual((a["step"], b["step"]), (4, 4))
            assert_same_state(self, a, b)


if __name__ == "__main__":
    unittest.main()
