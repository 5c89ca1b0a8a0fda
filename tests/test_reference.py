"""Tests of the PyTorch reference (scripts/), run with Debian's python3-torch 1.13 on the CPU:
step form == parallel form, chunked == quadratic linear attention, the DMoL PMF, model file
round trip, and training smoke tests whose exported models must match in the C engine."""
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import torch  # noqa: E402

import make_fixtures  # noqa: E402
import modelfile  # noqa: E402
from model import (Config, Model, causal_linear_attention, dmol_log_prob, dmol_pmf, phi,  # noqa: E402
                   EPS_LINEAR)

TINY = dict(n_layers=2, n_heads=4, d_head=8, d_ff=64, n_mix=3)
DATA = os.environ.get("LINGEN_DATA", os.path.join(ROOT, "data"))
SLOW = os.environ.get("LINGEN_SLOW_TESTS") == "1"   # make test-slow


class Reference(unittest.TestCase):
    def test_step_equals_parallel(self):
        torch.manual_seed(0)
        for att in ("linear", "softmax"):
            for norm, act in (("post", "relu"), ("pre", "gelu")):
                cfg = Config(attention=att, norm=norm, activation=act, **TINY)
                m = Model(cfg).double().eval()
                make_fixtures.randomize(m, torch.Generator().manual_seed(1))
                tok = torch.randint(0, 257, (2, 300))
                with torch.no_grad():
                    par = m(tok)
                    st = m.init_state(2, dtype=torch.float64)
                    stp = torch.stack([m.step(tok[:, t], t, st) for t in range(300)], 1)
                self.assertLess((par - stp).abs().max().item(), 1e-10, (att, norm, act))

    def test_chunked_equals_quadratic(self):
        torch.manual_seed(1)
        q, k, v = (torch.randn(2, 3, 200, 8, dtype=torch.float64) for _ in range(3))
        A = (phi(q) @ phi(k).transpose(-1, -2)).tril()
        ref = (A @ v) / (A.sum(-1, keepdim=True) + EPS_LINEAR)
        for chunk in (1, 7, 64, 256):
            out = causal_linear_attention(q, k, v, chunk=chunk)
            self.assertLess((out - ref).abs().max().item(), 1e-10, chunk)

    def test_linear_attention_stays_float32_under_bf16_autocast(self):
        # training runs under bf16 autocast; by default the whole linear attention stays float32
        torch.manual_seed(3)
        q, k, v = (torch.randn(2, 3, 784, 8) for _ in range(3))
        ref = causal_linear_attention(q, k, v)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = causal_linear_attention(q, k, v)
        self.assertEqual(out.dtype, torch.float32)
        self.assertTrue(torch.equal(out, ref))

    def test_head_stays_float32_under_bf16_autocast(self):
        # the head's means must resolve a bin (half-width 1/255), finer than bf16's 2^-8 near 1
        torch.manual_seed(4)
        m = Model(Config(attention="linear", **TINY)).eval()
        x = torch.randn(2, 5, m.cfg.d)
        with torch.no_grad():
            ref = m.head_out(x)
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                out = m.head_out(x.bfloat16())
                whole = m(torch.randint(0, 257, (2, 5)))
        self.assertEqual(out.dtype, torch.float32)
        self.assertEqual(whole.dtype, torch.float32)
        self.assertTrue(torch.equal(out, m.head_out(x.bfloat16().float())))
        self.assertLess((out - ref).abs().max().item(), 0.1)

    def test_mixed_linear_attention_under_bf16_autocast(self):
        # the training option: bf16 products, float32 phi and sums. Mostly negative q, k make
        # phi small, where elu(u) + 1 taken in bf16 cancels (error 1.8 here; float32 phi: 0.012)
        torch.manual_seed(3)
        q, k = (torch.randn(2, 3, 784, 8) - 6 for _ in range(2))
        v = torch.randn(2, 3, 784, 8)
        ref = causal_linear_attention(q, k, v)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = causal_linear_attention(q, k, v, mixed=True)
        self.assertEqual(out.dtype, torch.float32)
        self.assertLess((out - ref).abs().max().item(), 0.05)

    def test_phi_exact_where_elu_plus_one_cancels(self):
        # keys far below 0 (phi = exp(u) ~ 1e-7): F.elu(u) + 1 in float32 rounds those to
        # multiples of 6e-8 (error 0.088 here); phi takes exp(u) and matches float64 (3e-7)
        torch.manual_seed(4)
        q = torch.randn(2, 3, 784, 8) - 2
        k = torch.randn(2, 3, 784, 8) * 1.5 - 17
        v = torch.randn(2, 3, 784, 8)
        ref = causal_linear_attention(q.double(), k.double(), v.double())
        self.assertLess((causal_linear_attention(q, k, v).double() - ref).abs().max().item(), 1e-5)
        u = torch.tensor([-100.0, -30.0, 0.0, 100.0], requires_grad=True)
        phi(u).sum().backward()   # exp is taken of min(u, 0): no inf, so no NaN gradient
        self.assertTrue(torch.isfinite(u.grad).all())
        self.assertLess(abs(phi(torch.tensor(-30.0)).item() / math.exp(-30.0) - 1), 1e-6)

    def test_dropout_only_in_training(self):
        # the paper's recipe (dropout 0.1): evaluation and export see the undropped network,
        # training drops units of the feed-forward's hidden layer and of both residual branches
        torch.manual_seed(2)
        cfg = Config(attention="linear", norm="post", activation="relu", **TINY)
        m = Model(cfg, dropout=0.5).double()
        make_fixtures.randomize(m, torch.Generator().manual_seed(3))
        ref = Model(cfg).double()
        ref.load_state_dict(m.state_dict())
        tok = torch.randint(0, 257, (2, 50))
        hidden = []  # the feed-forward's hidden layer as the first layer's ff2 sees it
        m.layers[0].ff2.register_forward_pre_hook(lambda mod, a: hidden.append(a[0]))
        with torch.no_grad():
            self.assertEqual((m.eval()(tok) - ref.eval()(tok)).abs().max().item(), 0.0)
            self.assertGreater((m.train()(tok) - ref(tok)).abs().max().item(), 1e-3)
        zeros_eval, zeros_train = ((h == 0).double().mean().item() for h in hidden)
        self.assertGreater(zeros_train, zeros_eval + 0.15)  # relu's zeros, then half the rest

    def test_pmf_sums_to_one(self):
        torch.manual_seed(2)
        for M in (1, 10):
            for scale in (-7.0, -3.0, 0.0, 5.0):
                for mean in (-30.0, -1.0, 0.0, 0.5, 1.0, 30.0):
                    out = torch.cat([torch.randn(M) * 100, torch.full((M,), mean), torch.full((M,), scale)])
                    pmf = dmol_pmf(out)
                    self.assertTrue(torch.isfinite(pmf).all())
                    self.assertAlmostEqual(pmf.sum().item(), 1.0, delta=1e-9)

    def test_log_prob_matches_continuous_logistic(self):
        # a broad component: P(x) ~ density * bin width in the middle of the range
        out = torch.tensor([0.0, 0.1, math.log(0.3)], dtype=torch.float64)
        x = torch.tensor(128)
        c = 128 / 127.5 - 1
        s = 0.3
        u = (c - 0.1) / s
        dens = math.exp(-u) / (s * (1 + math.exp(-u)) ** 2)
        self.assertAlmostEqual(dmol_log_prob(out, x).item(), math.log(dens * 2 / 255), delta=1e-4)

    def test_model_file_round_trip(self):
        cfg = Config(attention="softmax", norm="pre", activation="gelu", height=4, width=4, channels=3,
                     dataset="cifar10", **TINY)
        m = Model(cfg)
        with tempfile.TemporaryDirectory() as d:
            for dt in ("F32", "F16", "BF16"):
                p = os.path.join(d, f"m-{dt}.bin")
                modelfile.export(m, p, {"note": "x"}, modelfile.DTYPES[dt])
                m2, meta = modelfile.load(p)
                self.assertEqual(m2.cfg, cfg)
                self.assertEqual(meta["note"], "x")
                for k, v in m.state_dict().items():
                    self.assertTrue(torch.equal(v.to(modelfile.DTYPES[dt]).float(), m2.state_dict()[k]), (dt, k))


class TrainSmoke(unittest.TestCase):
    def test_mnist(self):
        self.train_export_and_match_in_c("mnist", "mnist", 40, clip="1.0", ema_every=1)

    @unittest.skipUnless(SLOW, "slow (3072 positions in float64): make test-slow runs it")
    def test_cifar10(self):
        # no clipping, and the EMA every other step
        self.train_export_and_match_in_c("cifar10", "cifar-10", 25, clip="0", ema_every=2)

    def test_paper_recipe(self):
        # RAdam with decoupled weight decay, each tensor's gradient clipped, a constant learning
        # rate (no warmup: the first step's is --lr), the images in file order
        recs, meta = self.train_export_and_match_in_c(
            "mnist", "mnist", 40, clip="1.0", ema_every=1,
            extra=["--optimizer", "radam", "--clip-mode", "per-tensor", "--schedule", "constant", "--no-shuffle"])
        self.assertEqual(recs[0]["lr"], 3e-3)
        self.assertEqual((meta["optimizer"], meta["clip_mode"], meta["schedule"], meta["shuffle"], meta["lr"]),
                         ("radam", "per-tensor", "constant", "0", "0.003"))
        for words in ("RAdam(lr=0.003, betas=(0.9,0.999), wd=0.01 decoupled)", "clip 1.0 per tensor",
                      "constant lr", "file order"):
            self.assertIn(words, meta["recipe"])

    def train_export_and_match_in_c(self, dataset, folder, steps, clip, ema_every, extra=()):
        """A tiny model trains on 64 real images (loss goes down); its export loads in C and matches,
        and its metadata names the recipe (here: the gradient clipping and the EMA's interval).
        -> (the log's records, the model file's metadata)"""
        self.assertTrue(os.path.exists(os.path.join(DATA, folder)), f"no {folder} under {DATA}: set LINGEN_DATA")
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log.jsonl")
            out = os.path.join(d, "smoke.bin")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "train.py"), "--tiny", "--device", "cpu",
                            "--dataset", dataset, "--data", DATA, "--limit", "64", "--batch", "16",
                            "--steps", str(steps), "--lr", "3e-3", "--clip", clip, "--ema-every", str(ema_every),
                            "--warmup", "5", "--decay", "0", "--final-eval", "8", "--export", out,
                            "--export-dtype", "f32", "--log", log, *extra], check=True, capture_output=True)
            import json
            with open(log) as f:
                recs = [json.loads(line) for line in f]
            first = [r["train_bpd"] for r in recs if "train_bpd" in r][0]
            final = [r for r in recs if r.get("final")][0]
            self.assertLess(final["test_bpd_f32_weights"], first - 0.3, (first, final))
            # golden outputs of the trained model, then the C engine must reproduce them
            m, meta = modelfile.load(out, torch.float64)
            self.assertIn("no clipping" if clip == "0" else f"clip {clip}", meta["recipe"])
            self.assertEqual(f"every {ema_every} steps" in meta["recipe"], ema_every > 1, meta["recipe"])
            tok = torch.randint(0, 256, (2, m.cfg.seq_len), generator=torch.Generator().manual_seed(3))
            tok[:, 0] = 256
            with torch.no_grad():
                st = m.init_state(2, dtype=torch.float64)
                ref = torch.stack([m.step(tok[:, t], t, st) for t in range(m.cfg.seq_len)], 1)
            modelfile.write_safetensors(os.path.join(d, "smoke.golden"), {"tokens": tok.int(), "out": ref.float()}, {})
            exe = os.path.join(ROOT, os.environ.get("BUILD", "build"), "test_transformer")
            r = subprocess.run([exe, os.path.join(d, "smoke")], capture_output=True, text=True, cwd=ROOT)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("smoke: max |C - torch|", r.stdout)
        return recs, meta


class Int8(unittest.TestCase):
    def test_round_int8_as_lingen_holds_them(self):
        """evaluate.py --int8: every Linear weight but the head's a multiple of its block's scale
        (the block's largest / 127 rounded up to bfloat16, blocks of 32 inputs of one output),
        within half a scale."""
        from evaluate import round_int8
        torch.manual_seed(0)
        m = Model(Config(**dict(TINY, d_ff=40)))   # 40 inputs: a block of 32 and one of 8
        before = {n: p.detach().clone() for n, p in m.named_parameters()}
        round_int8(m)
        for name, mod in m.named_modules():
            if not isinstance(mod, torch.nn.Linear):
                continue
            w, w0 = mod.weight.detach(), before[name + ".weight"]
            if name == "head":
                self.assertTrue(torch.equal(w, w0))
                continue
            self.assertFalse(torch.equal(w, w0), name)
            for k in range(0, w.shape[1], 32):
                exact = w0[:, k:k + 32].abs().amax(1, keepdim=True) / 127
                s = exact.to(torch.bfloat16)   # nearest; where below, the held scale is the next one up
                up = torch.nextafter(s, torch.tensor(float("inf"), dtype=torch.bfloat16))
                s = torch.where(s.float() < exact, up.float(), s.float())
                q = w[:, k:k + 32] / s
                self.assertLess((q - q.round()).abs().max().item(), 1e-3, name)
                self.assertLessEqual(q.abs().max().item(), 127 + 1e-3, name)
                self.assertTrue(((w[:, k:k + 32] - w0[:, k:k + 32]).abs() <= s / 2 * 1.0001).all(), name)

    def test_round_int8_inputs_by_rows(self):
        """evaluate.py --int8: a Linear's input rows as the kernel takes them, each a multiple of
        its largest / 32767 within half of that, the largest itself kept; an all-zero row stays."""
        from evaluate import round_int8
        torch.manual_seed(1)
        lin = torch.nn.Sequential(torch.nn.Linear(40, 3))
        round_int8(lin)
        seen = []
        lin[0].register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach().clone()))
        x = torch.randn(5, 40) * torch.tensor([1.0, 1e-3, 1e3, 0.0, 7.0])[:, None]
        lin(x)
        xr = seen[0]   # the hook above runs after round_int8's
        t = x.abs().amax(1, keepdim=True) / 32767
        self.assertTrue(torch.equal(xr[3], torch.zeros(40)))
        keep = t[:, 0] > 0
        q = xr[keep] / t[keep]
        self.assertLess((q - q.round()).abs().max().item(), 0.02)
        self.assertTrue(((xr - x).abs() <= t / 2 * 1.0001 + 1e-30).all())
        self.assertTrue(torch.allclose(xr.abs().amax(1), x.abs().amax(1), rtol=1e-6))
        self.assertFalse(torch.equal(xr, x))


if __name__ == "__main__":
    unittest.main()
