"""A whole training step captured once in a CUDA graph and replayed (GPU only, PyTorch 2.x).

Captured whole (forward, backward, clipping, AdamW, EMA), the host queues one replay per step
instead of the optimizer's, clipping's and EMA's many small launches (2.7 ms of host time per
MNIST step at batch 16, `profile_train.py --phases`). It is exact (losses within 2e-6 of the
plain step over 5 steps) but not faster for MNIST at batch 16: that host time overlaps the
GPU's ~4.9 ms per step, which bounds the step (3,226 against 3,256 images/s).

What changes between steps lives in GPU tensors that a replay reads: the batch (`inp`,
`tgt`), the learning rate (`lr`) and the EMA's weight of the new weights (`ema_w`, 1 - decay;
0 leaves the average as it is: the graph still runs its update, adding zero). Outputs: `loss`
and `gnorm` (the gradient's global norm, before clipping).

    step = GraphedStep(model, loss_fn, batch, seq_len, dev, betas, wd, clip, ema_list_or_None)
    step.capture()                       # after loading any optimizer state into step.opt
    loss = step(inp, tgt, lr, ema_w)     # then as often as needed

`loss_fn(inp, tgt)` is the compiled loss of `model` (torch.compile's default mode: its kernels
are captured as they are). Checked against the plain step by `profile_train.py --whole-graph`.
"""
import math

import torch


class GraphedStep:
    def __init__(self, model, loss_fn, batch, seq_len, dev, betas, wd, clip, ema):
        self.loss_fn, self.clip, self.ema = loss_fn, clip, ema
        self.params = list(model.parameters())
        self.lr = torch.zeros((), device=dev)
        self.ema_w = torch.zeros((), device=dev)
        # fused AdamW, capturable: its step counts stay on the GPU and the tensor lr is read at replay
        self.opt = torch.optim.AdamW(self.params, lr=self.lr, betas=betas, weight_decay=wd,
                                     fused=True, capturable=True)
        self.inp = torch.zeros(batch, seq_len, dtype=torch.long, device=dev)
        self.tgt = torch.zeros(batch, seq_len, dtype=torch.long, device=dev)
        self.graph = None

    def _body(self):
        loss = self.loss_fn(self.inp, self.tgt)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.params, self.clip if self.clip > 0 else math.inf)
        self.opt.step()
        if self.ema is not None:  # ema += ema_w * (params - ema), ema_w read at replay
            diff = torch._foreach_sub([p.detach() for p in self.params], self.ema)
            torch._foreach_mul_(diff, self.ema_w)
            torch._foreach_add_(self.ema, diff)
        return loss, gnorm

    def capture(self, random=False):
        """Warm up (compiling, the optimizer's lazy state) with lr = 0 and ema_w = 0, so that the
        weights and the average do not move, capture, then put the optimizer's state back.
        random: the step draws random numbers (dropout); raises if two replays on one batch at
        lr = 0 give the same loss, i.e. if the graph replays the masks it drew at capture."""
        for g in self.opt.param_groups:  # loading a state dict may have replaced the lr tensor
            g["lr"] = self.lr
        saved = {id(p): {k: v.clone() for k, v in s.items()} for p, s in self.opt.state.items()}
        self.lr.zero_()
        self.ema_w.zero_()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._body()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)  # the capture allocates the gradients in the graph's pool
        with torch.cuda.graph(self.graph):
            self.loss, self.gnorm = self._body()
        if random:
            self.graph.replay()
            a = self.loss.item()
            self.graph.replay()
            b = self.loss.item()
            if a == b:
                raise RuntimeError(f"two replays on one batch gave the same loss {a}: fixed dropout masks")
        with torch.no_grad():  # the warm-up's moments and step counts are not the run's
            for p, state in self.opt.state.items():
                for k, v in state.items():
                    if id(p) in saved:
                        v.copy_(saved[id(p)][k])
                    else:
                        v.zero_()
        torch.cuda.synchronize()

    def __call__(self, inp, tgt, lr, ema_w=0.0):
        self.inp.copy_(inp)
        self.tgt.copy_(tgt)
        self.lr.fill_(lr)
        self.ema_w.fill_(ema_w)
        self.graph.replay()
        return self.loss
