"""Train a lingen model (MNIST or CIFAR-10, linear or softmax attention) on one GPU or,
data-parallel, on all the GPUs of a host.

The default recipe: AdamW, bf16 autocast (the head in float32), gradient clipping at global norm --clip, a
warmup-stable-decay learning rate over a wall-clock budget (linear warmup, constant, then a
linear decay to zero over the last --decay fraction of the budget, or of --total-steps), the
training images shuffled every epoch, and an exponential moving average of the weights (--ema).
The paper's recipe: --optimizer radam --clip-mode per-tensor --schedule constant --no-shuffle --ema 0, with
--lr 1e-4 --batch 16 (MNIST) or --lr 2e-4 --batch 10 (CIFAR-10), --dropout 0.1 and (softmax)
--attn-dropout 0.1 while it is in training mode: until its first evaluation, and after each
resumed start until the next.
At the end the raw and the averaged weights are evaluated on the test images; the better one
is exported, and the model file's metadata records the recipe.

A run continues from a model file (--init, a warm restart: fresh optimizer state), or exactly
where it stopped from a checkpoint (--ckpt: read if it exists, written at every evaluation and
when the process ends, or with --ckpt-every K at every K-th step of the run and its last; a
process killed on the way resumes from the last one). The images a step reads and its dropout
masks are functions of the step, so a resumed run trains bit for bit as an unbroken one would.
A --ckpt-half checkpoint holds the state rounded (weights and averages float16, the
optimizer's moments bfloat16): with --ckpt-every every run, stopped or not, rounds its state
to that at each checkpoint step and trains on from the rounded state, so that resumes stay
bit for bit; without it a resume continues from the rounding, the unbroken run from the
unrounded state.

How long a run trains:
  --minutes M          the whole run's wall-clock budget, counted across resumes; wsd's decay
                       follows the time spent (rank 0's, as of the last budget check).
                       Every process evaluates and exports at its end.
  --total-steps N      the whole run's length in steps, across resumes; wsd's decay spans its
                       last --decay x N steps, a function of the step alone. Each process (a
                       stretch) trains at most --minutes M, counted from its start (with
                       --ckpt-every K: then on to the next multiple of K, up to K steps more,
                       so that it ends at a checkpoint), and writes the checkpoint (--ckpt,
                       required) and the snapshot (--snapshot); the one that reaches step N
                       then evaluates and exports the final model (--export), the others
                       neither evaluate at their end nor export.
  --steps S            stops a process at step S of the run, either way (with --ckpt-every K,
                       at a step between checkpoints as a kill would: the checkpoint stays).
A run from scratch in stretches is one command, repeated until it logs "final" and exports:
  python3 scripts/train.py --dataset mnist --total-steps 200000 --warmup 0 --decay 0.2 \\
      --minutes 22 --dropout 0.1 --ckpt runs/mnist.pt --ckpt-half --ckpt-every 2000 \\
      --snapshot runs/mnist.snapshot.bin \\
      --log-file runs/mnist.jsonl --export models/mnist.bin --compile

Data-parallel: torchrun starts one process per GPU. Each reads its --batch images of every
global batch of N x --batch and DistributedDataParallel averages the gradients, so N processes
train as one process with batch N x --batch would. Rank 0 evaluates, logs and writes the files.
A process that fails, or waits for the others longer than --dist-timeout, exits with 1 (one
waiting in an NCCL collective is ended by PyTorch's watchdog), and the others then fail too.

One GPU:  python3 scripts/train.py --dataset mnist --minutes 20 --init models/mnist.bin \\
              --export models/mnist.bin --compile
N GPUs:   torchrun --standalone --nproc_per_node=N scripts/train.py ARGS   (the same ARGS)
CPU (tiny model, seconds): python3 scripts/train.py --tiny --device cpu --steps 20 --limit 64 ...
"""
import argparse
import datetime
import faulthandler
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import data
import modelfile
from model import CIFAR10, MNIST, Config, Model, bits_per_dim, inputs_targets, training_loss

TINY = dict(n_layers=2, n_heads=4, d_head=8, d_ff=64, n_mix=3)   # --tiny, for tests
BETAS = {"adamw": (0.9, 0.95), "radam": (0.9, 0.999)}
CHECK_EVERY = 50    # steps between reading the loss back and checking the budget (a host-GPU sync)
LOG_EVERY = 200     # steps between log lines
UNTIMED = 3         # the first steps compile: kept out of the budget
# NVLink multicast stays off: a program that uses it can put a shared host's GPUs out of
# service, and the all-reduce of data-parallel training does not need it
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="mnist", choices=["mnist", "cifar10"])
    ap.add_argument("--attention", default="linear", choices=["linear", "softmax"])
    ap.add_argument("--data", default=data.default_root(), help="dataset root (default $LINGEN_DATA or ./data)")
    ap.add_argument("--init", help="start from this model file (warm restart), if it exists")
    ap.add_argument("--ckpt", help="checkpoint to resume from (if it exists) and save to")
    ap.add_argument("--ckpt-half", action="store_true",
                    help="save the checkpoint at half precision (weights and averages float16, the optimizer's "
                         "moments bfloat16): half the bytes (8 a parameter with --ema, 48.6 MiB for MNIST), for "
                         "carrying it between machines; resumes bit for bit with --ckpt-every")
    ap.add_argument("--ckpt-every", type=int, default=0, metavar="K",
                    help="write the checkpoint at every K-th step of the run and at its last (--total-steps), "
                         "not at evaluations; a process out of --minutes trains on to the next such step, one "
                         "stopped elsewhere (--steps) leaves the last. With --ckpt-half the training state is "
                         "rounded there to what the checkpoint holds, so that its resumes are bit for bit")
    ap.add_argument("--export", help="write the final model file here (with --total-steps: once step N is reached)")
    ap.add_argument("--export-dtype", default="f16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--log-file", "--log", dest="log", help="append JSON lines here (--log-file under torchrun, whose own --log-dir would take --log)")
    ap.add_argument("--snapshot", help="write the current weights (averaged, with --ema) here (F16 model file) at "
                                       "every evaluation and at the end of a stretch (--total-steps)")
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="wall-clock budget: of the whole run, across resumes; with --total-steps, of this process")
    ap.add_argument("--total-steps", type=int, default=0,
                    help="the whole run's length in steps, across resumes: wsd's decay spans its last --decay, "
                         "--minutes bounds each process (0: the run and its schedule follow --minutes)")
    ap.add_argument("--steps", type=int, default=0, help="stop at this step of the run, counted across resumes (0: no limit)")
    ap.add_argument("--batch", type=int, default=64,
                    help="images per step and process (the global batch is N times this on N processes)")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--wd", type=float, default=0.01, help="decoupled weight decay")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "radam"],
                    help="AdamW, betas (0.9, 0.95); or RAdam, betas (0.9, 0.999), as the paper")
    ap.add_argument("--schedule", default="wsd", choices=["wsd", "constant"],
                    help="wsd: warmup, constant, linear decay to 0 (--warmup, --decay); constant: --lr throughout")
    ap.add_argument("--warmup", type=int, default=500, help="steps of linear warmup (wsd)")
    ap.add_argument("--decay", type=float, default=0.3,
                    help="fraction of the budget, or of --total-steps, spent decaying (wsd)")
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout on the residual branches and the feed-forward's hidden layer")
    ap.add_argument("--attn-dropout", type=float, default=0.0, help="dropout on softmax attention's weights")
    ap.add_argument("--clip", type=float, default=1.0, help="clip the gradient's norm to this (0: no clipping)")
    ap.add_argument("--clip-mode", default="global", choices=["global", "per-tensor"],
                    help="clip the norm of all gradients together, or of each parameter tensor's (the paper)")
    ap.add_argument("--no-shuffle", action="store_true", help="read the training images in file order (the paper)")
    ap.add_argument("--ema", type=float, default=0.999, help="weight EMA decay per step (0: none)")
    ap.add_argument("--ema-every", type=int, default=1,
                    help="update the EMA every K steps (decay to the power K): less host time per step")
    ap.add_argument("--eval-every", type=float, default=3.0, help="minutes between subset evaluations")
    ap.add_argument("--eval-subset", type=int, default=2000)
    ap.add_argument("--final-eval", type=int, default=10000, help="test images for the final fp32 evaluation")
    ap.add_argument("--no-f32-check", action="store_true",
                    help="skip the final evaluation of the unrounded float32 weights (saves GPU time)")
    ap.add_argument("--limit", type=int, default=0, help="use only this many training images")
    ap.add_argument("--tiny", action="store_true", help="tiny config (2 layers, d=32) for smoke tests")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                    help="on the GPU: bf16 autocast (the head stays float32) or float32 throughout (the paper's)")
    ap.add_argument("--mixed-attention", action="store_true",
                    help="linear attention's products in bf16, its phi and sums in float32 (model.py)")
    ap.add_argument("--chunk", type=int, default=64, help="linear attention's chunk length (model.py)")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode (reduce-overhead: CUDA graphs, for small batches)")
    ap.add_argument("--whole-graph", action="store_true",
                    help="capture the whole step (forward, backward, clipping, AdamW, EMA) in one CUDA graph "
                         "and replay it (graphstep.py; one CUDA process, AdamW, global clipping): exact, "
                         "but no faster for MNIST at batch 16, where the GPU bounds the step")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="under torchrun: cuda (one GPU per process, NCCL) or cpu (gloo)")
    ap.add_argument("--dist-timeout", type=float, default=30.0, metavar="MINUTES",
                    help="several processes: the longest a process waits for the others, in a collective "
                         "(rank 0's evaluations and checkpoints must fit) or in leaving the group; then it exits "
                         "with 1 (gloo), or PyTorch's NCCL watchdog ends it (NCCL)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-scheme", default="normal", choices=["normal", "pytorch"],
                    help="new weights: Linear from N(0, 0.02), zero biases; or nn.Linear's own (the paper's code)")
    a = ap.parse_args()
    if a.ema_every < 1:
        ap.error("--ema-every must be at least 1")
    if a.minutes <= 0 or a.batch < 1 or a.dist_timeout <= 0:
        ap.error("--minutes, --batch and --dist-timeout must be positive")
    if a.total_steps < 0 or a.steps < 0 or a.warmup < 0 or not 0 <= a.decay <= 1:
        ap.error("--total-steps, --steps and --warmup must be at least 0, --decay within [0, 1]")
    if a.total_steps and not a.ckpt:
        ap.error("--total-steps needs --ckpt: a stretch that stops before the last step continues from it")
    if a.ckpt_every < 0 or (a.ckpt_every and not a.ckpt):
        ap.error("--ckpt-every must be at least 0, and needs --ckpt")
    for opt, path in (("--ckpt", a.ckpt), ("--export", a.export), ("--snapshot", a.snapshot), ("--log-file", a.log)):
        if path and not os.path.isdir(os.path.dirname(path) or "."):   # found out now, not at the end
            ap.error(f"{opt} {path}: no folder {os.path.dirname(path)}")
    if a.whole_graph and (not a.device.startswith("cuda") or int(os.environ.get("WORLD_SIZE", "1")) > 1
                          or a.optimizer != "adamw" or a.clip_mode != "global"):
        ap.error("--whole-graph needs one CUDA process, --optimizer adamw and --clip-mode global")
    return a


def setup_distributed(a):
    """-> (rank, number of processes, device). Under torchrun (WORLD_SIZE > 1) each process
    takes the GPU of its LOCAL_RANK and joins the group through NCCL, or gloo on the CPU; a
    collective that waits longer than --dist-timeout for the others raises."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, torch.device(a.device)
    for k, v in NO_MULTICAST.items():
        os.environ.setdefault(k, v)
    timeout = datetime.timedelta(minutes=a.dist_timeout)
    if a.device.startswith("cuda"):
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", timeout=timeout)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), world, dev


def build_model(a):
    """The weights of --init if that file exists (a warm restart), else new ones.
    -> (model, the training so far as the init file records it)"""
    options = dict(dropout=a.dropout, attn_dropout=a.attn_dropout, chunk=a.chunk, mixed_attention=a.mixed_attention)
    so_far = {"gpu_seconds": 0.0, "epochs": 0.0, "steps": 0, "history": []}
    if a.init and os.path.exists(a.init):
        model, meta = modelfile.load(a.init, **options)
        for k in ("gpu_seconds", "epochs", "steps"):
            so_far[k] = type(so_far[k])(float(meta.get(k, 0)))
        so_far["history"] = json.loads(meta.get("history", "[]"))
        return model, so_far
    base = MNIST if a.dataset == "mnist" else CIFAR10
    cfg = Config(**{**base.as_dict(), "attention": a.attention, **(TINY if a.tiny else {})})
    return Model(cfg, init=a.init_scheme, **options), so_far


class BatchOrder:
    """Which training images a step reads: a function of the step alone, so that a resumed run
    reads what an unbroken one would. Epoch e is a permutation seeded by (seed, e), or the file's
    order; it is cut into global batches (a last partial one is dropped), and each process takes
    its own `batch` rows of every global batch."""

    def __init__(self, n, global_batch, shuffle, seed, dev):
        self.n, self.global_batch, self.shuffle, self.seed, self.dev = n, global_batch, shuffle, seed, dev
        self.epoch, self.perm = None, None

    def rows(self, step, rank, batch):
        epoch, i = divmod(step, self.n // self.global_batch)
        if epoch != self.epoch:
            g = torch.Generator().manual_seed(self.seed * 100003 + epoch)
            self.perm = (torch.randperm(self.n, generator=g) if self.shuffle else torch.arange(self.n)).to(self.dev)
            self.epoch = epoch
        start = i * self.global_batch + rank * batch
        return self.perm[start:start + batch]


def step_seed(seed, rank, step):
    """The seed of the random numbers (dropout masks) that process `rank` draws at `step`: a
    function of the step alone, so that a resumed run draws what an unbroken one would, on every
    process, however many numbers the evaluations drew in between."""
    return ((seed * 1000003 + rank + 1) * 2 ** 40 + step) % 2 ** 63


def lr_at(a, step, elapsed):
    """The learning rate at `step` of the run (counted across resumes), `elapsed` seconds of
    training spent. wsd: linear warmup over --warmup steps, then constant, then a linear decay
    to 0 over the last --decay of the run: of --total-steps (a function of the step alone),
    else of the --minutes budget."""
    if a.schedule == "constant":
        return a.lr
    frac = step / a.total_steps if a.total_steps else elapsed / (a.minutes * 60)
    w = min(1.0, (step + 1) / max(1, a.warmup))
    d = min(1.0, (1.0 - frac) / a.decay) if a.decay > 0 else 1.0
    return a.lr * w * max(d, 0.0)


class RAdamW(torch.optim.RAdam):
    """RAdam with decoupled weight decay, as the paper trains: each step first shrinks the
    weights by lr * wd (as AdamW does), then takes RAdam's step without decay. PyTorch 1.13's
    RAdam only adds the decay to the gradient; newer ones do this with decoupled_weight_decay."""

    def __init__(self, params, lr, betas, weight_decay):
        super().__init__(params, lr=lr, betas=betas, eps=1e-8, weight_decay=0.0)
        for g in self.param_groups:
            g["decoupled_wd"] = weight_decay

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            params = [p for p in g["params"] if p.grad is not None]
            if params and g["decoupled_wd"]:
                torch._foreach_mul_(params, 1.0 - g["lr"] * g["decoupled_wd"])
        return super().step(closure)


def make_optimizer(a, params, dev):
    if a.optimizer == "radam":
        return RAdamW(params, lr=a.lr, betas=BETAS["radam"], weight_decay=a.wd)
    fused = {"fused": True} if dev.type == "cuda" else {}
    return torch.optim.AdamW(params, lr=a.lr, betas=BETAS["adamw"], weight_decay=a.wd, **fused)


def clip_gradients(params, clip, mode, need_norm):
    """Clip the gradients to norm `clip`: the norm of all of them together (global), or each
    tensor's own (per-tensor). -> the global norm before clipping, or None when neither the
    clipping nor the log needs it (taking it costs host time at every step)."""
    if clip > 0 and mode == "per-tensor":
        grads = [p.grad for p in params if p.grad is not None]
        norms = torch.stack(torch._foreach_norm(grads))
        torch._foreach_mul_(grads, list((clip / (norms + 1e-6)).clamp(max=1.0).unbind()))
        return norms.norm()
    if clip > 0 or need_norm:
        return torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf)
    return None


class Ema:
    """An exponential moving average of the weights, in float32. Its decay ramps up as
    (1 + n) / (10 + n), so that a short run averages few steps. Updated every `every` steps with
    the decay of that many, it covers the same span of training for less host time per step
    (its many small kernels cost about 0.55 ms of host time per MNIST step at batch 16)."""

    def __init__(self, params, decay, every):
        self.tensors = [p.detach().clone() for p in params]
        self.decay, self.every = decay, every

    def weight(self, n):
        """The weight of the new weights in the average after step n of this run (0: no update)."""
        if (n + 1) % self.every:
            return 0.0
        return 1.0 - min(self.decay, (1 + n) / (10 + n)) ** self.every

    @torch.no_grad()
    def update(self, params, w):
        if w == 0:
            return
        params = [p.detach() for p in params]
        if hasattr(torch, "_foreach_lerp_"):  # one kernel for all tensors (PyTorch 2)
            torch._foreach_lerp_(self.tensors, params, w)
        else:
            for e, p in zip(self.tensors, params):
                e.lerp_(p, w)

    def model(self, cfg, dev):
        """A model holding the averaged weights."""
        m = Model(cfg).to(dev)
        with torch.no_grad():
            for q, e in zip(m.parameters(), self.tensors):
                q.copy_(e)
        return m


class Loss(torch.nn.Module):
    """The training loss as a module, so that torch.compile takes the model and the loss as one
    graph, and DistributedDataParallel can wrap them."""

    def __init__(self, model, amp):
        super().__init__()
        self.model, self.amp = model, amp

    def forward(self, inp, tgt):
        return training_loss(self.model, inp, tgt, self.amp)


def loss_functions(a, loss, world, dev):
    """The loss functions to train with, best first. One process: torch.compile in the mode
    asked for, then in its default mode, then eager; a failure moves on to the next. Several:
    DistributedDataParallel around the compiled module, as torch.compile's documentation advises,
    and nothing to fall back to (a second DDP on the same weights would also reduce their
    gradients)."""
    compiled = a.compile and hasattr(torch, "compile")
    if world > 1:
        inner = torch.compile(loss, mode=a.compile_mode) if compiled else loss
        ids = [dev.index] if dev.type == "cuda" else None
        return [DistributedDataParallel(inner, device_ids=ids, broadcast_buffers=False)]
    fns = [loss]
    if compiled:
        fns = [torch.compile(loss, mode=m) for m in dict.fromkeys([a.compile_mode, "default"])] + fns
    return fns


def forward_backward(fns, opt, inp, tgt, cuda_graphs):
    """The loss and its gradients by the first of fns that works (see loss_functions); a failure
    of torch.compile, also one in the backward as CUDA graphs can give, must not cost the run."""
    while True:
        try:
            opt.zero_grad(set_to_none=True)
            if cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()  # one CUDA graph replay per step
            loss = fns[0](inp, tgt)
            loss.backward()
            return loss
        except Exception as e:
            if len(fns) == 1:
                raise
            fns.pop(0)
            print(f"torch.compile failed ({e!r:.300}); now {'eager' if len(fns) == 1 else 'compile default'}",
                  file=sys.stderr)
            if hasattr(torch, "_dynamo"):  # drop what the failed mode compiled
                torch._dynamo.reset()


def whole_graph_step(a, loss, model, batch, dev, ema):
    """The step to capture whole in one CUDA graph (graphstep.py), once any optimizer state
    is loaded into its .opt."""
    from graphstep import GraphedStep
    return GraphedStep(model, torch.compile(loss), batch, model.cfg.seq_len, dev, BETAS["adamw"], a.wd, a.clip,
                       ema.tensors if ema else None)


def synced(loss, clocks, rank, world):
    """The loss over the global batch, and rank 0's clocks (seconds, in float64), on every
    process (one all-reduce): what follows from the clocks (whether to stop, the learning rate
    of a schedule in time) is then the same on every process, which each process's own clocks
    are not (rank 0's evaluations count in the others', which wait through them).
    -> (the loss, rank 0's clocks)"""
    t = torch.zeros(1 + len(clocks), dtype=torch.float64, device=loss.device)
    t[0] = loss.detach()
    if rank == 0:
        t[1:] = torch.tensor(clocks, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t)
        t[0] /= world
    lv, *clocks = t.tolist()
    return lv, clocks


def leave(fns, timeout):
    """Leave the process group together, and take it down here, while this process can still
    wait for it. DistributedDataParallel's reducer (in fns) holds the group too, and the last
    holder destroys it: the reducer destroys it holding Python's lock, while a gloo thread that
    has just run a collective may still need that lock to free the collective's tensor (its
    Python object), and waits for it as the group waits for the thread, forever. So the
    reducer goes first, and the group's own handle, which waits without Python's lock, last.
    The barrier waits at most the group's timeout; a teardown that takes longer than `timeout`
    seconds dumps every thread's stack and exits with 1 (faulthandler's own thread, which
    needs no Python lock)."""
    dist.barrier()   # a process whose peer has already exited can hang in the teardown
    faulthandler.dump_traceback_later(timeout, exit=True)
    fns.clear()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


def evaluate(model, images, batch, device, amp):
    """-> (bits/dim, its standard error), in eval mode (no dropout); the model is left in the
    mode it was in."""
    training = model.training
    model.eval()
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
        bpd, per = bits_per_dim(model, images.to(device), batch)
    model.train(training)
    return bpd, per.std().item() / math.sqrt(len(per))


def final_evaluation(a, model, ema, test, dev):
    """The raw and the averaged weights, each rounded to the export dtype as it will be shipped,
    evaluated in float32: -> (which, (bpd, se), the rounded model, the unrounded one, all bpds)."""
    export_dtype = modelfile.DTYPES[a.export_dtype.upper()]
    final = {}
    for kind, m in [("raw", model)] + ([("ema", ema.model(model.cfg, dev))] if ema else []):
        rounded = Model(model.cfg).to(dev).eval()
        rounded.load_state_dict({k: v.to(export_dtype).float() for k, v in m.state_dict().items()})
        final[kind] = (evaluate(rounded, test, 100, dev, amp=False), rounded, m)
    kind = min(final, key=lambda k: final[k][0][0])
    return (kind, *final[kind], {k: v[0][0] for k, v in final.items()})


def recipe(a, cfg, world, batch, graphed, weights):
    """The recipe as the model file records it: one line of text, and the main choices as keys."""
    b1, b2 = BETAS[a.optimizer]
    name = "AdamW" if a.optimizer == "adamw" else "RAdam"
    linear = cfg.attention == "linear"
    text = (f"{name}(lr={a.lr}, betas=({b1},{b2}), wd={a.wd}{' decoupled' if a.optimizer == 'radam' else ''}), "
            f"batch {batch * world}{f' ({world} processes x {batch})' if world > 1 else ''}, "
            + (f"warmup {a.warmup}, decay {a.decay}" if a.schedule == "wsd" else "constant lr")
            + (f", {a.total_steps} steps" if a.total_steps else "")
            + f", dropout {a.dropout}" + (f", attention dropout {a.attn_dropout}" if a.attn_dropout and not linear else "") + ", " + ("bf16 autocast, head float32" if a.precision == "bf16" else "float32")
            + (" (linear attention mixed)" if a.mixed_attention and linear else "")
            + (f", chunk {a.chunk}" if a.chunk != 64 else "")
            + (f", clip {a.clip}{' per tensor' if a.clip_mode == 'per-tensor' else ''}" if a.clip > 0 else
               ", no clipping")
            + f", EMA {a.ema}{f' every {a.ema_every} steps' if a.ema_every > 1 else ''} ({weights} weights shipped)"
            + (", whole step in one CUDA graph" if graphed else "")
            + (", file order" if a.no_shuffle else ", shuffled")
            + (", nn.Linear's own init" if a.init_scheme == "pytorch" else ""))
    return {"trained_by": "scripts/train.py", "recipe": text, "optimizer": a.optimizer, "lr": a.lr,
            "batch": batch * world, "processes": world, "schedule": a.schedule, "clip_mode": a.clip_mode,
            "shuffle": int(not a.no_shuffle)}


def totals(so_far, step, epochs, elapsed, world):
    """The training behind the weights, the init file's included (GPU seconds: of all processes)."""
    return {"steps": so_far["steps"] + step, "epochs": round(epochs, 3),
            "gpu_seconds": round(so_far["gpu_seconds"] + elapsed * world, 1)}


def on_floating(x, fn):
    """x (tensors in dicts, lists and tuples) with fn applied to its floating tensors, not to its
    scalars (an optimizer's step count, which must stay exact); the rest as is."""
    if torch.is_tensor(x):
        return fn(x) if x.is_floating_point() and x.dim() > 0 else x
    if isinstance(x, dict):
        return {k: on_floating(v, fn) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(on_floating(v, fn) for v in x)
    return x


@torch.no_grad()
def round_to_half(model, opt, ema):
    """Round the training state in place to what a half checkpoint holds, and back to its own
    dtype: the weights and averages through float16, the optimizer's moments through bfloat16
    (its step counts stay). Training on from here computes what a run resumed from that
    checkpoint computes, bit for bit."""
    for tensors, dtype in ((model.state_dict(), torch.float16), (ema.tensors if ema else [], torch.float16),
                           (list(opt.state.values()), torch.bfloat16)):
        on_floating(tensors, lambda t: t.copy_(t.to(dtype)))


def save_checkpoint(path, model, opt, ema, step, elapsed, curve, provenance, half=False):
    """Renamed into place: whole or not at all. provenance: the model file's metadata so far, so
    that modelfile.py can export the checkpoint with its recipe. half: weights and averages as
    float16 (the model files' own precision), the optimizer's moments as bfloat16 (their range
    is float32's); resuming casts them back (load_state_dict keeps each parameter's dtype)."""
    weights, moments, averages = model.state_dict(), opt.state_dict(), ema.tensors if ema else None
    if half:
        f16, bf16 = (lambda t: t.to(torch.float16)), (lambda t: t.to(torch.bfloat16))
        weights, averages = on_floating(weights, f16), on_floating(averages, f16)
        moments = {**moments, "state": on_floating(moments["state"], bf16)}
    torch.save({"model": weights, "opt": moments, "step": step, "elapsed": elapsed,
                "curve": curve, "config": model.cfg.as_dict(), "ema": averages,
                "provenance": provenance}, path + ".tmp")
    os.replace(path + ".tmp", path)


def export_snapshot(model, path, epochs):
    """The weights so far, as an F16 model file marked as a snapshot."""
    modelfile.export(model, path, {"epochs": round(epochs, 3), "snapshot": "1"}, torch.float16)


def log(rec, path):
    rec["time"] = round(time.time(), 1)
    line = json.dumps(rec)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def main():
    """Train; with several processes, any failure (a collective that timed out, or whose peer
    has gone, included) ends this process with 1 at once: its stack, a line naming the
    process, and no teardown, which could wait on the lost peers. The peers then fail in
    their next collective."""
    t_start = time.time()   # a stretch's --minutes count from here
    a = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return run(a, t_start)
    try:
        run(a, t_start)
    except Exception as e:
        traceback.print_exc()
        waited = f" (--dist-timeout {a.dist_timeout:g} minutes)" if "timed out" in str(e).lower() else ""
        print(f"train.py: process {os.environ.get('RANK', '?')} of {world} stops: {type(e).__name__}: {e}{waited}",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)


def run(a, t_start):
    """The training (main's), from a stretch's start at t_start."""
    rank, world, dev = setup_distributed(a)
    torch.manual_seed(a.seed)
    amp = dev.type == "cuda" and a.precision == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 evaluation must be fp32
    torch.backends.cudnn.allow_tf32 = False

    # ---- the model, the data, the optimizer
    model, so_far = build_model(a)
    if rank == 0 and so_far["epochs"]:
        print(f"warm restart from {a.init}: {so_far['epochs']:.1f} epochs so far", file=sys.stderr)
    model = model.to(dev).train()
    cfg, params = model.cfg, list(model.parameters())
    train = data.load(a.dataset, a.data, "train", a.limit).to(dev)
    test = data.load(a.dataset, a.data, "test", a.final_eval if a.final_eval < 10000 else 0) if rank == 0 else None
    n_train = train.shape[0]
    batch = min(a.batch, n_train // world)
    if batch < 1:
        sys.exit(f"train.py: {n_train} training images are too few for {world} processes")
    # a warm restart (its init file records steps) reads new permutations
    order = BatchOrder(n_train, batch * world, not a.no_shuffle, a.seed + so_far["steps"], dev)
    per_step = batch * world / n_train   # epochs per step

    def epochs_at(step):   # epochs of the whole model, this run's `step` steps included
        return so_far["epochs"] + step * per_step

    ema = Ema(params, a.ema, a.ema_every) if a.ema > 0 else None
    loss_module = Loss(model, amp)
    graphed = whole_graph_step(a, loss_module, model, batch, dev, ema) if a.whole_graph else None
    opt = graphed.opt if graphed else make_optimizer(a, params, dev)

    # ---- resume: step and elapsed count the whole run, across resumes
    step, elapsed, curve = 0, 0.0, []
    ck = torch.load(a.ckpt, map_location=dev) if a.ckpt and os.path.exists(a.ckpt) else None
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        if ema and ck.get("ema") is not None:
            for e, v in zip(ema.tensors, ck["ema"]):
                e.copy_(v)
        step, elapsed, curve = ck["step"], ck["elapsed"], ck["curve"]
        if rank == 0:
            print(f"resumed {a.ckpt} at step {step}", file=sys.stderr)
    if graphed:
        try:
            graphed.capture(random=a.dropout > 0 or a.attn_dropout > 0)
        except Exception as e:
            print(f"capturing the whole step failed ({e!r:.300}); plain steps", file=sys.stderr)
            graphed, opt = None, make_optimizer(a, params, dev)
            if ck is not None:
                opt.load_state_dict(ck["opt"])
    fns = loss_functions(a, loss_module, world, dev)
    cuda_graphs = a.compile and a.compile_mode == "reduce-overhead" and hasattr(torch, "compiler")

    ckpt_recipe = recipe(a, cfg, world, batch, graphed, "raw")  # a checkpoint holds the raw weights

    def checkpoint():   # the state after `step` steps, to a.ckpt (rank 0)
        save_checkpoint(a.ckpt, model, opt, ema, step, elapsed, curve,
                        {**totals(so_far, step, epochs_at(step), elapsed, world), **ckpt_recipe}, a.ckpt_half)

    # ---- the training loop
    budget = a.minutes * 60
    last = min(n for n in (a.steps, a.total_steps, math.inf) if n)   # the step this process stops at
    start, elapsed_start = step, elapsed   # this process's first step and the run's time then
    saved = step   # the step of the checkpoint on disk (0 without one: a resume starts over)
    t_prev = t_check = t_eval = time.time()
    step_check, smooth = step, None
    clock = elapsed   # the run's time as of the last check, rank 0's: the same on every process
    while step < last:
        fresh = step - start < UNTIMED
        torch.manual_seed(step_seed(a.seed, rank, so_far["steps"] + step))
        inp, tgt = inputs_targets(train[order.rows(step, rank, batch)])
        lr = lr_at(a, step, clock)
        logged = rank == 0 and ((step + 1) % LOG_EVERY == 0 or fresh)
        if graphed:
            loss, gn = graphed(inp, tgt, lr, ema.weight(step) if ema else 0.0), graphed.gnorm
        else:
            for g in opt.param_groups:
                g["lr"] = lr
            loss = forward_backward(fns, opt, inp, tgt, cuda_graphs)
            gn = clip_gradients(params, a.clip, a.clip_mode, logged)
            opt.step()
            if ema:
                ema.update(params, ema.weight(step))
        step += 1
        now = time.time()
        if not fresh:
            elapsed += now - t_prev
        t_prev = now

        if a.ckpt_every and (step % a.ckpt_every == 0 or step == a.total_steps):   # a function of the step
            if a.ckpt_half:   # every process trains on from what the checkpoint holds
                round_to_half(model, opt, ema)
            if rank == 0:
                checkpoint()
            saved, t_prev = step, time.time()

        if step % CHECK_EVERY == 0 or fresh:  # the same steps on every process
            lv, (elapsed, stretch) = synced(loss, (elapsed, now - t_start), rank, world)
            clock = elapsed
            stop = (stretch if a.total_steps else elapsed) >= budget
            smooth = lv if smooth is None else 0.9 * smooth + 0.1 * lv
            if logged:
                log({"step": step, "epoch": round(epochs_at(step), 3),
                     "train_bpd": round(smooth, 4), "lr": lr, "gnorm": round(gn.item(), 3), "elapsed": round(elapsed, 1),
                     "img_s": round((step - step_check) * batch * world / max(1e-9, now - t_check), 1)}, a.log)
            step_check, t_check = step, now
            if stop and a.ckpt_every:   # out of time: on to the next checkpoint step, and no further
                last = min(last, -(-step // a.ckpt_every) * a.ckpt_every)
            elif stop:
                break

        if rank == 0 and now - t_eval > a.eval_every * 60:  # the other processes wait in their next step
            avg = ema.model(cfg, dev) if ema else model
            bpd, se = evaluate(avg, test[:a.eval_subset], 250, dev, amp)
            raw = evaluate(model, test[:a.eval_subset], 250, dev, amp)[0] if ema else bpd
            ep = epochs_at(step)
            curve.append([round(ep, 3), round(bpd, 4)])
            log({"eval_subset": a.eval_subset, "epoch": round(ep, 3), "test_bpd": round(bpd, 4), "se": round(se, 4),
                 "test_bpd_raw": round(raw, 4)}, a.log)
            if a.ckpt and not a.ckpt_every:
                checkpoint()
                saved = step
            if a.snapshot:
                export_snapshot(avg, a.snapshot, ep)
            t_eval = t_prev = time.time()

    if a.ckpt and rank == 0:
        if not a.ckpt_every:
            checkpoint()
            saved = step
        elif saved != step:   # as if killed here: a resume repeats the steps since, as they were
            print(f"step {step} is no checkpoint step (--ckpt-every {a.ckpt_every}): {a.ckpt} stays at step {saved}",
                  file=sys.stderr)
    if world > 1:
        leave(fns, a.dist_timeout * 60)
    if rank != 0:
        return
    if step < a.total_steps:   # a stretch of the run ends: the next resumes from the checkpoint
        if a.snapshot:
            export_snapshot(ema.model(cfg, dev) if ema else model, a.snapshot, epochs_at(step))
        log({"stretch_end": step, "total_steps": a.total_steps, "epoch": round(epochs_at(step), 3),
             "elapsed": round(elapsed, 1)}, a.log)
        print(f"stopped at step {step} of {a.total_steps}; the same command resumes from {a.ckpt} at step {saved}",
              file=sys.stderr)
        return

    # ---- final evaluation and export (rank 0)
    epochs, steps = epochs_at(step), so_far["steps"] + step
    timed = max(0, step - start - UNTIMED)   # this process's steps in (elapsed - elapsed_start)
    kind, (bpd, se), shipped, best, by_kind = final_evaluation(a, model, ema, test, dev)
    f32 = {} if a.no_f32_check else {
        "test_bpd_fp32_weights": round(evaluate(best.float(), test, 100, dev, amp=False)[0], 5)}
    log({"final": True, "test_images": len(test), "weights": kind, **f32,
         f"test_bpd_{a.export_dtype}_weights": round(bpd, 5), "se": round(se, 5),
         **{f"test_bpd_{k}": round(v, 5) for k, v in by_kind.items()},
         "epochs": round(epochs, 3), "steps": step,
         "img_s": round(timed * batch * world / max(1e-9, elapsed - elapsed_start), 1)}, a.log)
    curve.append([round(epochs, 3), round(bpd, 4)])
    if a.export:
        rec = recipe(a, cfg, world, batch, graphed, kind)
        hist = so_far["history"] + [{"date": time.strftime("%Y-%m-%d"), "epochs": round(epochs, 2), "steps": steps,
                                     "lr": a.lr, "batch": batch * world, "minutes": round(elapsed / 60, 1),
                                     "curve": curve, "test_bpd": round(bpd, 4), "test_images": len(test),
                                     "weights": kind, "ema": a.ema}]
        meta = {**totals(so_far, step, epochs, elapsed, world), "test_bits_per_dim": round(bpd, 5),
                "test_images": len(test), "date": time.strftime("%Y-%m-%d"), **rec,
                "history": json.dumps(hist, separators=(",", ":"))}
        modelfile.export(shipped, a.export, meta, modelfile.DTYPES[a.export_dtype.upper()])
        print(f"exported {a.export}", file=sys.stderr)


if __name__ == "__main__":
    main()
