"""Where a training step's GPU time goes (device machine, PyTorch 2.x, one GPU).

Times the compiled training step (bf16 autocast, AdamW, as scripts/train.py) of the paper's
MNIST or CIFAR-10 model on random images for a few variants, each printed as soon as it is
measured, then prints the CUDA kernels of the first variant that take the most time. Stops
starting new variants after --budget seconds, so that it fits a short device call.

    python3 scripts/profile_train.py [--dataset mnist] [--batch 64[,16,...]] [--only NAME,...] [--budget 150] [--phases]
"""
import argparse
import functools
import time

import torch

import model as M


def variants():
    """(name, attention, chunk, tf32 inside the linear attention, mixed linear attention)"""
    yield "linear, chunk 64, float32 (as trained in session 3)", "linear", 64, False, False
    yield "linear, chunk 64, mixed: bf16 products, float32 phi and sums", "linear", 64, False, True
    yield "linear, chunk 128, mixed", "linear", 128, False, True
    yield "linear, chunk 256, mixed", "linear", 256, False, True
    yield "softmax (fused attention)", "softmax", 0, False, False
    yield "linear, chunk 64, TF32 products", "linear", 64, True, False


def build(cfg, attention, chunk, mixed, batch, dev, mode):
    cfg = M.Config(**{**cfg.as_dict(), "attention": attention})
    net = M.Model(cfg).to(dev).train()
    net.chunk, net.mixed_attention = chunk, mixed
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)

    fwd = torch.compile(functools.partial(M.training_loss, net, amp=True), mode=mode)
    images = torch.randint(0, 256, (batch, cfg.seq_len), dtype=torch.uint8, device=dev)
    inp, tgt = M.inputs_targets(images)

    ema = [p.detach().clone() for p in net.parameters()]

    def step(times=None):
        """One training step as train.py's; with a dict `times`, adds each phase's seconds to it
        (the host's time to queue the phase, and until the GPU has finished it as well)."""
        def phase(name, fn):
            if times is None:
                return fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            q, w = times.get(name, (0.0, 0.0))
            times[name] = (q + t1 - t0, w + time.perf_counter() - t0)
            return out
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # as train.py: one graph replay per step
        opt.zero_grad(set_to_none=True)
        loss = phase("forward", lambda: fwd(inp, tgt))
        phase("backward", loss.backward)
        phase("clip", lambda: torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0))
        phase("optimizer", opt.step)
        phase("EMA", lambda: torch._foreach_lerp_(ema, [p.detach() for p in net.parameters()], 1e-3))
    return step


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
