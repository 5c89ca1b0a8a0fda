"""Where a training step's GPU time goes (PyTorch 2.x, one GPU).

Times the compiled training step (bf16 autocast, AdamW, as scripts/train.py) of the paper's
MNIST or CIFAR-10 model on random images for a few variants, each printed as soon as it is
measured, then prints the CUDA kernels of the first variant that take the most time. Stops
starting new variants after --budget seconds, so that it fits a short call on a GPU machine.

    python3 tools/profile_train.py [--dataset mnist] [--batch 64[,16,...]] [--only NAME,...] [--budget 150] [--phases] [--whole-graph]
"""
import argparse
import functools
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))  # model.py
import model as M  # noqa: E402
from graphstep import GraphedStep  # noqa: E402


def variants():
    """(name, attention, chunk, tf32 inside the linear attention, mixed linear attention)"""
    yield "linear, chunk 64, float32", "linear", 64, False, False
    yield "linear, chunk 64, mixed: bf16 products, float32 phi and sums", "linear", 64, False, True
    yield "linear, chunk 128, mixed", "linear", 128, False, True
    yield "linear, chunk 256, mixed", "linear", 256, False, True
    yield "softmax (fused attention)", "softmax", 0, False, False
    yield "linear, chunk 64, TF32 products", "linear", 64, True, False


def parts(cfg, attention, chunk, mixed, dev, mode, dropout=0.0):
    """The model (the same weights at every call), its fused AdamW, the compiled loss, the EMA."""
    cfg = M.Config(**{**cfg.as_dict(), "attention": attention})
    torch.manual_seed(0)
    net = M.Model(cfg, dropout, chunk=chunk, mixed_attention=mixed).to(dev).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    fwd = torch.compile(functools.partial(M.training_loss, net, amp=True), mode=mode)
    ema = [p.detach().clone() for p in net.parameters()]
    return cfg, net, opt, fwd, ema


def plain_step(net, opt, fwd, ema, inp, tgt, mode, phase=lambda name, fn: fn()):
    """One training step as train.py's, its kernels queued one by one; phase(name, fn) runs each
    part (to time it). Returns the loss."""
    if mode == "reduce-overhead":
        torch.compiler.cudagraph_mark_step_begin()  # as train.py: one graph replay per step
    opt.zero_grad(set_to_none=True)
    loss = phase("forward", lambda: fwd(inp, tgt))
    phase("backward", loss.backward)
    phase("clip", lambda: torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0))
    phase("optimizer", opt.step)
    phase("EMA", lambda: torch._foreach_lerp_(ema, [p.detach() for p in net.parameters()], 1e-3))
    return loss


def build(cfg, attention, chunk, mixed, batch, dev, mode):
    cfg, net, opt, fwd, ema = parts(cfg, attention, chunk, mixed, dev, mode)
    images = torch.randint(0, 256, (batch, cfg.seq_len), dtype=torch.uint8, device=dev)
    inp, tgt = M.inputs_targets(images)

    def step(times=None):
        """One step; with a dict `times`, adds each phase's seconds to it (the host's time to
        queue the phase, and until the GPU has finished it as well)."""
        def timed(name, fn):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            q, w = times.get(name, (0.0, 0.0))
            times[name] = (q + t1 - t0, w + time.perf_counter() - t0)
            return out
        if times is None:
            return plain_step(net, opt, fwd, ema, inp, tgt, mode)
        return plain_step(net, opt, fwd, ema, inp, tgt, mode, timed)
    return step


def check_whole_graph(cfg, attention, chunk, mixed, batch, dev, steps, dropout):
    """The step captured whole (graphstep.py, as train.py --whole-graph): checks it against the
    plain step (without dropout: the same losses, weights and EMA after 5 steps on the same
    batches, both from the same start, which the capture must leave as it found it), times its
    replays, and checks that dropout draws new masks at every replay."""
    t0 = time.time()
    cfg, gnet, _, gfwd, gema = parts(cfg, attention, chunk, mixed, dev, "default", dropout=dropout)
    gs = GraphedStep(gnet, gfwd, batch, cfg.seq_len, dev, (0.9, 0.999), 0.01, 1.0, gema)
    gs.capture()
    t1 = time.time()
    if dropout == 0:
        cfg, rnet, ropt, rfwd, rema = parts(cfg, attention, chunk, mixed, dev, "default")
        gen = torch.Generator(device=dev).manual_seed(1)
        worst = 0.0
        for _ in range(5):
            inp, tgt = M.inputs_targets(torch.randint(0, 256, (batch, cfg.seq_len), dtype=torch.uint8,
                                                      device=dev, generator=gen))
            rl = plain_step(rnet, ropt, rfwd, rema, inp, tgt, "default").item()
            gl = gs(inp, tgt, 1e-4, 1e-3).item()
            worst = max(worst, abs(gl - rl) / abs(rl))
        dw = max((g - r).abs().max().item() for g, r in zip(gnet.parameters(), rnet.parameters()))
        de = max((g - r).abs().max().item() for g, r in zip(gema, rema))
        print(f"  whole step in one CUDA graph against the plain step over 5 steps: loss differs by at "
              f"most {worst:.2e} (relative); weights by {dw:.2e}, EMA by {de:.2e} (largest absolute)", flush=True)

    inp, tgt = M.inputs_targets(torch.randint(0, 256, (batch, cfg.seq_len), dtype=torch.uint8, device=dev))
    torch.cuda.synchronize()
    t2 = time.time()
    for _ in range(steps):
        gs(inp, tgt, 1e-4, 1e-3)
    t3 = time.time()
    torch.cuda.synchronize()
    dt = (time.time() - t2) / steps
    print(f"  whole step in one CUDA graph: {batch / dt:.0f} images/s ({dt * 1e3:.2f} ms/step, host "
          f"{(t3 - t2) * 1e3 / steps:.2f} ms; compile+capture {t1 - t0:.0f} s)", flush=True)

    # lr 0: the weights stay, so two replays on one batch differ only by dropout's masks
    a, b = gs(inp, tgt, 0.0).item(), gs(inp, tgt, 0.0).item()
    ok = a != b if dropout > 0 else a == b
    print(f"  dropout {dropout}: two replays on one batch, weights fixed: {a:.6f}, {b:.6f} "
          f"({'as they must be' if ok else 'WRONG'})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="mnist", choices=["mnist", "cifar10"])
    ap.add_argument("--batch", default="64", help="batch sizes, comma-separated: each variant at each")
    ap.add_argument("--only", default="", help="run only the variants whose name contains one of these (comma-separated)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode, e.g. reduce-overhead")
    ap.add_argument("--no-table", action="store_true", help="skip the kernel table")
    ap.add_argument("--phases", action="store_true",
                    help="also time each phase of the step (forward, backward, clip, optimizer, EMA) on its own")
    ap.add_argument("--whole-graph", action="store_true",
                    help="also capture the whole step in one CUDA graph: check it against the plain step, time it")
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout of the --whole-graph check")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds after which no new variant starts")
    a = ap.parse_args()
    dev = torch.device("cuda")
    cfg = M.MNIST if a.dataset == "mnist" else M.CIFAR10
    t_start = time.time()
    first = None
    only = [w for w in a.only.split(",") if w]
    runs = [(b, v) for b in map(int, a.batch.split(",")) for v in variants()
            if not only or any(w in v[0] for w in only)]
    for batch, (name, attention, chunk, tf32, mixed) in runs:
        if time.time() - t_start > a.budget:
            print(f"(budget spent: {name}, batch {batch} not run)", flush=True)
            continue
        torch.backends.cuda.matmul.allow_tf32 = tf32
        t0 = time.time()
        step = build(cfg, attention, chunk, mixed, batch, dev, a.compile_mode)
        for _ in range(3):  # compile and warm up
            step()
        torch.cuda.synchronize()
        t1 = time.time()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        dt = (time.time() - t1) / a.steps
        print(f"{name}, batch {batch}: {batch / dt:.0f} images/s ({dt * 1e3:.1f} ms/step, compile+warm-up {t1 - t0:.0f} s)",
              flush=True)
        if a.phases:
            times = {}
            for _ in range(a.steps):
                step(times)
            print("  phases, ms per step (host queues it / until the GPU is done): " + ", ".join(
                f"{k} {q * 1e3 / a.steps:.2f} / {w * 1e3 / a.steps:.2f}" for k, (q, w) in times.items()), flush=True)
        if a.whole_graph:
            try:
                check_whole_graph(cfg, attention, chunk, mixed, batch, dev, a.steps, a.dropout)
            except Exception as e:  # report and go on with the other variants
                print(f"  whole step in one CUDA graph failed: {e!r:.500}", flush=True)
        if first is None:
            first = step
    torch.backends.cuda.matmul.allow_tf32 = False
    if first is not None and not a.no_table:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                first()
            torch.cuda.synchronize()
        ka = prof.key_averages()
        key = "self_device_time_total" if hasattr(next(iter(ka)), "self_device_time_total") else "self_cuda_time_total"
        print(ka.table(sort_by=key, row_limit=25, max_name_column_width=70), flush=True)


if __name__ == "__main__":
    main()
