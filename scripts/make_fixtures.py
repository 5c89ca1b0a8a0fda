"""Make the golden test fixtures: tiny models with random weights and the reference outputs.

    python3 scripts/make_fixtures.py tests/fixtures [NAME...]   (default: every fixture)

For each tiny model NAME it writes NAME.bin (the model file) and NAME.golden (safetensors):
  tokens [B, T] I32     a fixed input sequence (BOS first)
  out    [B, T, 3M] F32 head outputs of the reference step form, computed in float64
and for MNIST-shaped models, with $LINGEN_DATA set: eval_bpd [K] F32, the bits/dim of the
first K MNIST test images (all 784 dims), computed in float64.
"""
import math
import os
import sys

import torch

import data
import modelfile
from model import Config, Model, bits_per_dim

TINY = dict(n_layers=2, n_heads=4, d_head=8, d_ff=64, n_mix=3)
# heads of 32 and widths of the GPU's tiled kernels (d a multiple of 64, d_ff of 128), its weights
# stored as halves like the shipped models': the GPU paths that only such models take
HEADS32 = dict(n_layers=2, n_heads=2, d_head=32, d_ff=128, n_mix=3)
HALF = {"tiny-heads32-mnist"}   # fixtures stored as float16
FIXTURES = {
    "tiny-linear-mnist": Config(attention="linear", norm="post", activation="relu", **TINY),
    "tiny-softmax-mnist": Config(attention="softmax", norm="post", activation="relu", **TINY),
    "tiny-linear-cifar": Config(attention="linear", norm="pre", activation="gelu", height=32, width=32,
                                channels=3, dataset="cifar10", **TINY),
    "tiny-softmax-cifar": Config(attention="softmax", norm="pre", activation="gelu", height=32, width=32,
                                 channels=3, dataset="cifar10", **TINY),
    "tiny-heads32-mnist": Config(attention="linear", norm="post", activation="relu", **HEADS32),
}
EVAL_IMAGES = 4


def randomize(model, g):
    """Weights large enough that every part of the network matters (the training init is near-constant)."""
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            elif name == "emb.weight":
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) / math.sqrt(p.shape[1]))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    only = set(sys.argv[2:])
    os.makedirs(outdir, exist_ok=True)
    for i, (name, cfg) in enumerate(FIXTURES.items()):
        if only and name not in only:
            continue
        g = torch.Generator().manual_seed(1000 + i)
        m = Model(cfg).double().eval()
        randomize(m, g)
        # the reference runs on exactly the weights the file stores (float32, or float16)
        dtype = torch.float16 if name in HALF else torch.float32
        m.load_state_dict({k: v.to(dtype).double() for k, v in m.state_dict().items()})
        modelfile.export(m, os.path.join(outdir, name + ".bin"), {"fixture": "random weights, scripts/make_fixtures.py"},
                         dtype)
        B, T = 2, cfg.seq_len
        tokens = torch.randint(0, 256, (B, T), generator=g)
        tokens[:, 0] = 256
        with torch.no_grad():
            st = m.init_state(B, dtype=torch.float64)
            out = torch.stack([m.step(tokens[:, t], t, st) for t in range(T)], 1)
            err = (out - m(tokens)).abs().max().item()
        assert err < 1e-9, f"{name}: step and parallel forms differ by {err}"
        golden = {"tokens": tokens.int(), "out": out.float()}
        if cfg.dataset == "mnist" and os.environ.get("LINGEN_DATA"):
            imgs = data.load("mnist", os.environ["LINGEN_DATA"], "test")[:EVAL_IMAGES]
            _, per = bits_per_dim(m, imgs)
            golden["eval_bpd"] = per.float()
        modelfile.write_safetensors(os.path.join(outdir, name + ".golden"), golden, {"model": name + ".bin"})
        print(f"{name}: {sum(p.numel() for p in m.parameters())} params", file=sys.stderr)


if __name__ == "__main__":
    main()
