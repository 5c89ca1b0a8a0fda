"""Train a lingen model (MNIST or CIFAR-10, linear or softmax attention).

The recipe (see models/README.md): AdamW, bf16 autocast, gradient clipping (--clip), a
warmup-stable-decay learning rate over a wall-clock budget (linear warmup, constant,
then a linear decay to zero over the last --decay fraction of the budget) and an
exponential moving average of the weights (--ema). At the end both the raw and the
averaged weights are evaluated on the test images; the better one is exported and the
metadata says which. Training
continues across sessions by starting from the shipped model file (--init), a warm
restart; within a session it resumes from --ckpt if that exists.

GPU:  python3 scripts/train.py --dataset mnist --attention linear --minutes 20 \
          --init models/mnist.bin --export models/mnist.bin --compile
CPU smoke test (tiny): python3 scripts/train.py --tiny --steps 20 --limit 64 --device cpu ...
"""
import argparse
import functools
import json
import math
import os
import sys
import time

import torch

import data
import modelfile
from graphstep import GraphedStep
from model import CIFAR10, MNIST, Config, Model, bits_per_dim, inputs_targets, training_loss


def log(rec, path):
    rec["time"] = round(time.time(), 1)
    line = json.dumps(rec)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def lr_at(frac, step, a):
    """Warmup (steps), then constant, then linear decay to 0 over the last a.decay of the budget."""
    w = min(1.0, (step + 1) / a.warmup)
    d = min(1.0, (1.0 - frac) / a.decay) if a.decay > 0 else 1.0
    return a.lr * w * max(d, 0.0)


def evaluate(model, images, batch, device, amp):
    model.eval()
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
        bpd, per = bits_per_dim(model, images.to(device), batch)
    model.train()
    return bpd, per.std().item() / math.sqrt(len(per))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="mnist", choices=["mnist", "cifar10"])
    ap.add_argument("--attention", default="linear", choices=["linear", "softmax"])
    ap.add_argument("--data", default=data.default_root(), help="dataset root (default $LINGEN_DATA or ./data)")
    ap.add_argument("--init", help="start from this model file (warm restart), if it exists")
    ap.add_argument("--ckpt", help="checkpoint to resume from (if it exists) and save to")
    ap.add_argument("--export", help="write the final model file here")
    ap.add_argument("--export-dtype", default="f16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--log", help="append JSON lines here")
    ap.add_argument("--snapshot", help="write the current weights here (F16 model file) at every evaluation")
    ap.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget for training")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: budget only)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--decay", type=float, default=0.3, help="fraction of the budget spent decaying")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=1.0,
                    help="clip the gradient's global norm to this (0: no clipping, as the paper's code)")
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
    ap.add_argument("--mixed-attention", action="store_true",
                    help="linear attention's products in bf16, its phi and sums in float32 (model.py)")
    ap.add_argument("--chunk", type=int, default=64, help="linear attention's chunk length (model.py)")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--whole-graph", action="store_true",
                    help="capture the whole step (forward, backward, clipping, AdamW, EMA) in one CUDA graph "
                         "and replay it (graphstep.py; CUDA only): the host queues one replay per step "
                         "(exact, but no faster for MNIST at batch 16: the GPU bounds that step)")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode (reduce-overhead: CUDA graphs, for small batches)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.ema_every < 1:
        ap.error("--ema-every must be at least 1")
    if a.whole_graph and not a.device.startswith("cuda"):
        ap.error("--whole-graph needs a CUDA device")

    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    amp = dev.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 evaluation must be fp32
    torch.backends.cudnn.allow_tf32 = False

    base = MNIST if a.dataset == "mnist" else CIFAR10
    prov = {"gpu_seconds": 0.0, "epochs": 0.0, "steps": 0, "history": []}
    if a.init and os.path.exists(a.init):
        model, meta = modelfile.load(a.init)
        for k in ("gpu_seconds", "epochs", "steps"):
            prov[k] = type(prov[k])(float(meta.get(k, 0)))
        prov["history"] = json.loads(meta.get("history", "[]"))
        print(f"warm restart from {a.init}: {prov['epochs']:.1f} epochs so far", file=sys.stderr)
    else:
        cfg = Config(**{**base.as_dict(), "attention": a.attention})
        if a.tiny:
            cfg = Config(**{**cfg.as_dict(), "n_layers": 2, "n_heads": 4, "d_head": 8, "d_ff": 64, "n_mix": 3})
        model = Model(cfg)
    for layer in model.layers:
        layer.drop.p = a.dropout
    model.mixed_attention = a.mixed_attention
    model.chunk = a.chunk
    cfg = model.cfg
    model = model.to(dev).train()

    train = data.load(a.dataset, a.data, "train", a.limit)
    test = data.load(a.dataset, a.data, "test", a.final_eval if a.final_eval < 10000 else 0)
    train = train.to(dev)
    n_train = train.shape[0]
    bs = min(a.batch, n_train)

    loss_fn = functools.partial(training_loss, model, amp=amp)
    # the averaged weights, fp32; the decay ramps up as (1+n)/(10+n) so that a short run averages few steps
    ema = [p.detach().clone() for p in model.parameters()] if a.ema > 0 else None
    betas = (0.9, 0.95)
    ck = torch.load(a.ckpt, map_location=dev) if a.ckpt and os.path.exists(a.ckpt) else None

    def plain_optimizer():
        fused = {"fused": True} if dev.type == "cuda" else {}
        return torch.optim.AdamW(model.parameters(), lr=a.lr, betas=betas, weight_decay=a.wd, **fused)
    graphed = GraphedStep(model, torch.compile(loss_fn), bs, cfg.seq_len, dev, betas, a.wd, a.clip,
                          ema) if a.whole_graph else None
    opt = graphed.opt if graphed else plain_optimizer()
    step, elapsed, curve = 0, 0.0, []
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        if ema is not None and ck.get("ema") is not None:
            for e, v in zip(ema, ck["ema"]):
                e.copy_(v)
        step, elapsed, curve = ck["step"], ck["elapsed"], ck["curve"]
        print(f"resumed {a.ckpt} at step {step}", file=sys.stderr)
    if graphed:
        try:
            graphed.capture(random=a.dropout > 0)
        except Exception as e:  # a failed capture must not cost the run: plain steps instead
            print(f"capturing the whole step failed ({e!r:.300}); plain steps", file=sys.stderr)
            graphed, opt = None, plain_optimizer()
            if ck is not None:
                opt.load_state_dict(ck["opt"])

    def ema_weight(n):
        """The weight of the new weights in the average after step n (0: no update).
        The EMA costs 0.55 ms of host time per MNIST step at batch 16 (session 7), so
        --ema-every K updates only every K-th step, with the decay of K steps; the average
        covers the same span of training."""
        if ema is None or (n + 1) % a.ema_every:
            return 0.0
        return 1.0 - min(a.ema, (1 + n) / (10 + n)) ** a.ema_every

    def ema_update(w):
        if w > 0:
            with torch.no_grad():
                params = [p.detach() for p in model.parameters()]
                if hasattr(torch, "_foreach_lerp_"):  # one kernel for all tensors (PyTorch 2)
                    torch._foreach_lerp_(ema, params, w)
                else:
                    for e, p in zip(ema, params):
                        e.lerp_(p, w)

    def averaged():
        """A copy of the model holding the EMA weights (the model itself when there is no EMA)."""
        if ema is None:
            return model
        m = Model(cfg).to(dev)
        with torch.no_grad():
            for q, e in zip(m.parameters(), ema):
                q.copy_(e)
        return m

    # the forward to use, best first: torch.compile in the mode asked for, in its default mode,
    # eager; a failure (also one in the backward, as CUDA graphs can give) moves on to the next
    fwds = [loss_fn]
    if a.compile and hasattr(torch, "compile"):
        fwds = [torch.compile(loss_fn, mode=m) for m in dict.fromkeys([a.compile_mode, "default"])] + fwds
    cuda_graphs = len(fwds) > 1 and a.compile_mode == "reduce-overhead" and hasattr(torch, "compiler")

    def save_ckpt():
        if a.ckpt:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "elapsed": elapsed, "curve": curve, "config": cfg.as_dict(), "ema": ema}, a.ckpt + ".tmp")
            os.replace(a.ckpt + ".tmp", a.ckpt)

    def plain_step(inp, tgt, lr, ema_w, logged):
        """One training step, its kernels queued one by one; returns the loss and the gradient's
        norm (None when neither clipping nor the log needs it)."""
        for g in opt.param_groups:
            g["lr"] = lr
        while True:
            try:
                opt.zero_grad(set_to_none=True)
                if cuda_graphs:
                    torch.compiler.cudagraph_mark_step_begin()  # one CUDA graph replay per step
                loss = fwds[0](inp, tgt)
                loss.backward()
                break
            except Exception as e:  # a torch.compile failure must not cost the run
                if len(fwds) == 1:
                    raise
                fwds.pop(0)
                print(f"torch.compile failed ({e!r:.300}); now {'eager' if len(fwds) == 1 else 'compile default'}",
                      file=sys.stderr)
                if hasattr(torch, "_dynamo"):  # drop what the failed mode compiled
                    torch._dynamo.reset()
        # the norm costs 1.4 ms of host time per MNIST step (session 7): without clipping, take it
        # only for the steps that log it
        gn = None
        if a.clip > 0 or logged:
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else math.inf)
        opt.step()
        ema_update(ema_w)
        return loss, gn

    budget = a.minutes * 60
    step0, t_last_eval = 0, time.time()  # step counts this session's steps
    perm, pi = torch.randperm(n_train, device=dev), 0
    t_prev = time.time()
    smooth = None
    while elapsed < budget and not (a.steps and step - step0 >= a.steps):
        if pi + bs > n_train:
            perm, pi = torch.randperm(n_train, device=dev), 0
        inp, tgt = inputs_targets(train[perm[pi:pi + bs]])
        pi += bs
        lr = lr_at(elapsed / budget, step - step0, a)
        logged = (step + 1) % 200 == 0 or step + 1 - step0 <= 3
        if graphed:
            loss, gn = graphed(inp, tgt, lr, ema_weight(step - step0)), graphed.gnorm
        else:
            loss, gn = plain_step(inp, tgt, lr, ema_weight(step - step0), logged)
        step += 1
        now = time.time()
        if step - step0 > 3:  # the first steps compile: keep them out of the budget
            elapsed += now - t_prev
        t_prev = now
        if step % 50 == 0 or step - step0 <= 3:
            lv = loss.item()
            smooth = lv if smooth is None else 0.9 * smooth + 0.1 * lv
            if logged:
                ep = prov["epochs"] + (step - step0) * bs / n_train
                log({"step": step, "epoch": round(ep, 3), "train_bpd": round(smooth, 4), "lr": lr,
                     "gnorm": round(gn.item(), 3), "elapsed": round(elapsed, 1),
                     "img_s": round(50 * bs / max(1e-9, now - getattr(main, "_t50", now - 1)), 1)}, a.log)
            main._t50 = now
        if now - t_last_eval > a.eval_every * 60:
            avg = averaged()
            bpd, se = evaluate(avg, test[:a.eval_subset], 250, dev, amp)
            raw = evaluate(model, test[:a.eval_subset], 250, dev, amp)[0] if ema is not None else bpd
            ep = prov["epochs"] + (step - step0) * bs / n_train
            curve.append([round(ep, 3), round(bpd, 4)])
            log({"eval_subset": a.eval_subset, "epoch": round(ep, 3), "test_bpd": round(bpd, 4), "se": round(se, 4),
                 "test_bpd_raw": round(raw, 4)}, a.log)
            save_ckpt()
            if a.snapshot:
                modelfile.export(avg, a.snapshot, {"epochs": round(ep, 3), "snapshot": "1"}, torch.float16)
            t_last_eval = time.time()
            t_prev = t_last_eval

    save_ckpt()
    epochs = prov["epochs"] + (step - step0) * bs / n_train
    # final evaluation in fp32 of the weights exactly as they will be shipped (rounded to the
    # export dtype), for the raw and the averaged weights; the better one is exported
    export_dtype = modelfile.DTYPES[a.export_dtype.upper()]
    n_eval = min(a.final_eval, test.shape[0])
    final = {}
    for kind, m in [("raw", model)] + ([("ema", averaged())] if ema is not None else []):
        rounded = Model(cfg).to(dev).eval()
        rounded.load_state_dict({k: v.to(export_dtype).float() for k, v in m.state_dict().items()})
        final[kind] = (evaluate(rounded, test[:n_eval], 100, dev, amp=False), rounded, m)
    kind = min(final, key=lambda k: final[k][0][0])
    (bpd, se), shipped, best = final[kind]
    f32 = {} if a.no_f32_check else {
        "test_bpd_fp32_weights": round(evaluate(best.float(), test[:n_eval], 100, dev, amp=False)[0], 5)}
    log({"final": True, "test_images": n_eval, "weights": kind, **f32,
         f"test_bpd_{a.export_dtype}_weights": round(bpd, 5), "se": round(se, 5),
         **{f"test_bpd_{k}": round(v[0][0], 5) for k, v in final.items()},
         "epochs": round(epochs, 3), "steps": step}, a.log)
    curve.append([round(epochs, 3), round(bpd, 4)])
    if a.export:
        hist = prov["history"] + [{"date": time.strftime("%Y-%m-%d"), "epochs": round(epochs, 2),
                                   "steps": prov["steps"] + step - step0, "lr": a.lr, "batch": bs,
                                   "minutes": round(elapsed / 60, 1), "curve": curve,
                                   "test_bpd": round(bpd, 4), "test_images": n_eval,
                                   "weights": kind, "ema": a.ema}]
        p = {"steps": prov["steps"] + step - step0, "epochs": round(epochs, 3),
             "gpu_seconds": round(prov["gpu_seconds"] + elapsed, 1),
             "test_bits_per_dim": round(bpd, 5), "test_images": n_eval,
             "date": time.strftime("%Y-%m-%d"), "trained_by": "scripts/train.py",
             "recipe": f"AdamW(lr={a.lr}, betas=(0.9,0.95), wd={a.wd}), batch {bs}, warmup {a.warmup}, "
                       f"decay {a.decay}, dropout {a.dropout}, bf16 autocast"
                       f"{' (linear attention mixed)' if a.mixed_attention and cfg.attention == 'linear' else ''}"
                       f"{f', chunk {a.chunk}' if a.chunk != 64 else ''}, "
                       f"{f'clip {a.clip}' if a.clip > 0 else 'no clipping'}, "
                       f"EMA {a.ema}{f' every {a.ema_every} steps' if a.ema_every > 1 else ''} ({kind} weights shipped)"
                       f"{', whole step in one CUDA graph' if graphed else ''}",
             "history": json.dumps(hist, separators=(",", ":"))}
        modelfile.export(shipped, a.export, p, export_dtype)
        print(f"exported {a.export}", file=sys.stderr)


if __name__ == "__main__":
    main()
