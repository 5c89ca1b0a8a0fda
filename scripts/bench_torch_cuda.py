"""Time the PyTorch reference's RNN step on a GPU, written as strongly as PyTorch allows: the
state S, z updated in place and the WHOLE step (embedding, every layer, head, a DMOL sampler
that feeds the next token) captured once in a CUDA graph and replayed, for `make bench-cuda`.

    python3 scripts/bench_torch_cuda.py models/mnist.bin --batch 1 64 1024 --steps 200

Weights in float32 and in bfloat16 (the state and the attention arithmetic stay float32). Each
line: "torch-graph MODEL batch B DTYPE: X images/s (Y ms/step)", images/s = B / (step time x N)
from --steps replays after a warm-up (every position of a linear model costs the same).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modelfile  # noqa: E402
from model import EPS_LINEAR, LOG_SCALE_MIN, phi  # noqa: E402,F401


def make_step(m, B, dev):
    """The step as a closure over static tensors (tok, pos, S, z), all updated in place."""
    c = m.cfg
    H, D, M = c.n_heads, c.d_head, c.n_mix
    S = [torch.zeros(B, H, D, D, device=dev) for _ in range(c.n_layers)]
    z = [torch.zeros(B, H, D, device=dev) for _ in range(c.n_layers)]
    tok = torch.full((B,), 256, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    pe = m.pe.to(dev, m.emb.weight.dtype)

    def attn_for(i):
        def attn(q, k, v):  # [B,H,1,D]; float32 state and arithmetic
            dt = q.dtype
            q, k, v = phi(q[:, :, 0].float()), phi(k[:, :, 0].float()), v[:, :, 0].float()
            S[i].add_(k.unsqueeze(-1) * v.unsqueeze(-2))
            z[i].add_(k)
            num = (q.unsqueeze(-2) @ S[i]).squeeze(-2)
            den = (q * z[i]).sum(-1, keepdim=True)
            return (num / (den + EPS_LINEAR)).unsqueeze(2).to(dt)
        return attn

    def step():
        x = torch.cat([m.emb(tok), pe.index_select(0, pos).expand(B, -1)], -1)[:, None]
        for i, layer in enumerate(m.layers):
            x = layer(x, attn_for(i))
        out = m.head_out(x)[:, 0].float()
        logit, mu, ls = out[:, :M], out[:, M:2 * M], out[:, 2 * M:]
        # component by Gumbel-max, then the logistic by inversion and its bin
        g = -torch.log(-torch.log(torch.rand_like(logit).clamp_(1e-12, 1 - 1e-7)))
        k = (logit + g).argmax(-1, keepdim=True)
        u = torch.rand(B, 1, device=dev).clamp_(1e-7, 1 - 1e-7)
        y = mu.gather(1, k) + torch.exp(ls.gather(1, k)) * (torch.log(u) - torch.log1p(-u))
        tok.copy_(((y + 1) * 127.5).round().clamp(0, 255).long()[:, 0])
        pos.add_(1)

    return step, pos, tok


def bench(path, B, dtype, steps, dev):
    m, _ = modelfile.load(path)
    m = m.to(dev, dtype).eval()
    N = m.cfg.seq_len
    steps = min(steps, N - 8)
    with torch.inference_mode():
        step, pos, _ = make_step(m, B, dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graphs asks
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        pos.zero_()
        for _ in range(5):
            g.replay()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(steps):
            g.replay()
        b.record()
        b.synchronize()
        sec = a.elapsed_time(b) / 1e3 / steps
    return B / (sec * N), sec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, nargs="+", default=[64])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_torch_cuda.py: no CUDA GPU for PyTorch")
    dev = torch.device("cuda")
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    for B in a.batch:
        for name in a.dtypes:
            try:
                ips, sec = bench(a.model, B, dtypes[name], a.steps, dev)
                print(f"torch-graph {a.model} batch {B} {name}: {ips:.1f} images/s ({sec * 1e3:.3f} ms/step)", flush=True)
            except Exception as ex:  # one failed size (memory) must not hide the others
                print(f"torch-graph {a.model} batch {B} {name}: failed: {type(ex).__name__}: {ex}", flush=True)
            torch.cuda.empty_cache()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
