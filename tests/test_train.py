"""Tests of scripts/train.py's parts, in one process on the CPU: the order in which the training
images are read, per-tensor gradient clipping, RAdam's decoupled weight decay, the schedules."""
import argparse
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))

import torch  # noqa: E402

import train  # noqa: E402


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

    def test_schedules(self):
        a = argparse.Namespace(lr=1e-3, warmup=10, decay=0.5, schedule="wsd")
        self.assertAlmostEqual(train.lr_at(a, 0.0, 0), 1e-4)    # warmup
        self.assertAlmostEqual(train.lr_at(a, 0.4, 100), 1e-3)  # stable
        self.assertAlmostEqual(train.lr_at(a, 0.75, 100), 5e-4)  # half-way down the decay
        a.schedule = "constant"
        self.assertEqual([train.lr_at(a, f, s) for f, s in ((0.0, 0), (0.75, 100))], [1e-3, 1e-3])


if __name__ == "__main__":
    unittest.main()
