"""Time a linear model's step form (RNN mode) in PyTorch on the CPU, for `make bench`.

    python3 scripts/bench_torch.py models/mnist.bin --batch 64 --steps 50 --threads 2

The strongest plain PyTorch step we know: the model's own weights and modules (model.py), under
torch.inference_mode, with the state S, z updated in place (addcmul_, add_) instead of new tensors
per step, torch.set_num_threads as given, and the same batch as lingen. Before timing, its head
outputs are checked against model.step (the reference) on the same tokens. It runs the first
--steps positions of a sampling run, teacher-forced on random tokens (the cost of a step does not
depend on the values, and no time goes to drawing samples, which lingen's figure includes), and
prints one JSON line: seconds per position, the implied images/s, and which PyTorch it was (version,
BLAS, MKL, oneDNN). For a linear model every position costs the same, so a prefix extrapolates to
the whole image. --bf16 holds the layers' weights in bfloat16 and takes their products on bfloat16
inputs, as lingen's steps do where the processor has AVX512-BF16 (the head, the norms and the
state stay float32). --int8 quantizes the layers' Linear modules dynamically (torch.ao.quantization:
8-bit weights, each input row quantized to 8 bits as it comes, integer products), PyTorch's own
answer to a step that streams its weights, as lingen's 8-bit weights at small batches are. make bench
times each and compares lingen with the fastest.
"""
import argparse
import json
import re
import time

import torch
import torch.nn.functional as F

import modelfile
from model import EPS_LINEAR, phi


def linear(lin, x):
    """lin(x), its product in the weight's dtype (float32, or bfloat16 with --bf16), out in float32;
    a dynamically quantized Linear (--int8) takes and gives float32 itself."""
    if not isinstance(lin, torch.nn.Linear):
        return lin(x)
    return F.linear(x.to(lin.weight.dtype), lin.weight, lin.bias).float()


def feed_forward(layer, x):
    """layer.ff(x) through linear() (no dropout: the model is in eval mode)."""
    return linear(layer.ff2, layer.act(linear(layer.ff1, x)))


def fast_step(m, tokens, t, S, z):
    """model.step for a linear model with the state updated in place: [B] tokens -> [B, 3M]."""
    x = m.embed(tokens[:, None], t0=t)[:, 0]
    B, d = x.shape
    H, D = m.cfg.n_heads, m.cfg.d_head
    for i, layer in enumerate(m.layers):
        a = layer.attn
        q, k, v = linear(a.qkv, layer.norm1(x) if layer.pre else x).view(B, 3, H, D).unbind(1)
        q, k = phi(q), phi(k)
        S[i].addcmul_(k.unsqueeze(-1), v.unsqueeze(-2))        # S += phi(k) v^T
        z[i].add_(k)                                            # z += phi(k)
        num = torch.matmul(q.unsqueeze(-2), S[i]).squeeze(-2)
        den = (q * z[i]).sum(-1, keepdim=True) + EPS_LINEAR
        y = linear(a.out, (num / den).reshape(B, d))
        if layer.pre:
            x = x + y
            x = x + feed_forward(layer, layer.norm2(x))
        else:
            x = layer.norm1(x + y)
            x = layer.norm2(x + feed_forward(layer, x))
    return m.head_out(x)


def torch_info():
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    return {"torch": torch.__version__, "blas": blas.group(1) if blas else "unknown",
            "mkl": torch.backends.mkl.is_available(), "onednn": torch.backends.mkldnn.is_available(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()
            if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability") else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="the layers' products in bfloat16")
    ap.add_argument("--int8", action="store_true", help="the layers' Linear modules quantized dynamically (qint8)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m, _ = modelfile.load(a.model)
    m.eval()
    if m.cfg.attention != "linear":
        raise SystemExit(f"{a.model}: bench_torch.py times linear models (RNN mode) only")
    N = m.cfg.seq_len
    steps = min(a.steps, N)
    tok = torch.randint(0, 256, (a.batch, steps))
    tok[:, 0] = 256
    with torch.inference_mode():
        st = m.init_state(a.batch)
        want = [m.step(tok[:, t], t, st) for t in range(min(steps, 3))]   # the reference step, float32
        tol = 1e-5   # relative to the outputs' norm
        if a.bf16:   # bfloat16 products: about 2^-9 of each term, 0.5% of the outputs' norm after
            for layer in m.layers:   # 8 layers (one output can move by 0.2); a wrong step moves it by 10% or more
                for lin in (layer.attn.qkv, layer.attn.out, layer.ff1, layer.ff2):
                    lin.to(torch.bfloat16)
            tol = 3e-2
        if a.int8:   # 8-bit weights (a scale per output) and inputs (a scale per call): 3-9% of the
            qc = torch.ao.quantization.per_channel_dynamic_qconfig   # outputs' norm here, so the
            torch.ao.quantization.quantize_dynamic(m.layers, {torch.nn.Linear: qc}, dtype=torch.qint8, inplace=True)
            tol = 2e-1   # check catches a wrong step, not a coarse one
        S, z = m.init_state(a.batch)["S"], m.init_state(a.batch)["z"]
        for t, w in enumerate(want):   # the same numbers as the reference step
            got = fast_step(m, tok[:, t], t, S, z)
            rel = ((w - got).norm() / w.norm()).item()
            if not rel <= tol:
                raise SystemExit(f"fast step differs from model.step at position {t}: relative error {rel:.3g}")
        S, z = m.init_state(a.batch)["S"], m.init_state(a.batch)["z"]
        fast_step(m, tok[:, 0], 0, S, z)   # warm-up
        S, z = m.init_state(a.batch)["S"], m.init_state(a.batch)["z"]
        t0 = time.perf_counter()
        for t in range(steps):
            fast_step(m, tok[:, t], t, S, z)
        secs = (time.perf_counter() - t0) / steps
    print(json.dumps({"model": a.model, "batch": a.batch, "threads": a.threads, "steps": steps,
                      "dtype": "int8" if a.int8 else "bfloat16" if a.bf16 else "float32",
                      "seconds_per_step": secs, "images_per_s": a.batch / (secs * N), **torch_info()}))


if __name__ == "__main__":
    main()
