"""PyTorch evaluation of a lingen model file: test bits/dim over all N dims, in float32 (or 64).

    python3 scripts/evaluate.py models/mnist.bin [--limit 1000] [--data DIR] [--double] [--int8]

The reference that the C engine's `lingen eval bits-per-dim` and the model card are checked against.
--int8 computes the layers' Linear products as lingen's 8-bit steps do (src/kernels/matmul_q8.h): the
weights in blocks of 32 inputs of one output, integers in -127..127 times the block's largest / 127
rounded up to bfloat16; each row of their input (one image's position) integers in
-32767..32767 times the row's largest / 32767.
"""
import argparse
import math
import sys
import time

import torch

import data
import modelfile
from model import bits_per_dim


def bf16_up(s):
    """Non-negative float32 values rounded up to bfloat16 (matmul_q8.c's bf16_up): a float's top
    16 bits, plus one where the bottom 16 are not all zero."""
    b = s.contiguous().view(torch.int32)
    return (((b >> 16) + ((b & 0xFFFF) != 0).int()) << 16).view(torch.float32)


def round_rows16(x):
    """Each row (last dim) of x as matmul_q8.c takes it: qx = x * (32767 / max |x|) rounded to
    nearest, times max |x| / 32767; a row whose largest is below 2^-100 becomes zeros."""
    m = x.abs().amax(-1, keepdim=True)
    inv = torch.where(m >= 2.0 ** -100, 32767 / m, torch.zeros_like(m))
    return (x * inv).round() * (m / 32767)


def round_int8(model, block=32):
    """Every Linear weight but the head's as lingen's 8-bit weights hold it, and the input of each
    such Linear rounded by rows as the kernel rounds it (src/kernels/matmul_q8.c)."""
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear) and name != "head":
                w = mod.weight
                n_out, n_in = w.shape
                pad = (-n_in) % block
                wb = torch.nn.functional.pad(w, (0, pad)).reshape(n_out, -1, block)
                s = bf16_up(wb.abs().amax(-1, keepdim=True).float() / 127).to(w.dtype)
                q = (wb / s.clamp_min(torch.finfo(s.dtype).tiny)).round()   # an all-zero block stays 0
                w.copy_((q * s).reshape(n_out, -1)[:, :n_in])
                mod.register_forward_pre_hook(lambda mod, args: (round_rows16(args[0]),))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--data", default=data.default_root())
    ap.add_argument("--split", default="test", choices=["test", "train"])
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--double", action="store_true", help="evaluate in float64")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--int8", action="store_true", help="the layers' products as LINGEN_INT8=1 takes them")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dt = torch.float64 if a.double else torch.float32
    m, meta = modelfile.load(a.model, dt)
    if a.int8:
        round_int8(m)
    m = m.to(a.device)
    imgs = data.load(m.cfg.dataset, a.data, a.split)
    if a.limit:
        imgs = imgs[:a.limit]
    t0 = time.time()
    bpd, per = bits_per_dim(m, imgs.to(a.device), a.batch)
    se = per.std().item() / math.sqrt(len(per))
    print(f"bits/dim {bpd:.5f} +- {se:.5f} over {len(per)} {a.split} images ({a.model}, PyTorch {torch.__version__}, "
          f"{'float64' if a.double else 'float32'}{', 8-bit weights, 16-bit inputs' if a.int8 else ''}, {time.time() - t0:.1f} s)")
    card = meta.get("test_bits_per_dim")
    if card:
        print(f"model card: {card}", file=sys.stderr)


if __name__ == "__main__":
    main()
