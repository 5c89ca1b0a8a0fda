"""Read and write lingen model files (safetensors; see docs/model-format.md).

No dependency beyond torch and the standard library, so it runs on Debian's
python3-torch 1.13 as well as on PyTorch 2.x.

    python3 scripts/modelfile.py ckpt.pt out.bin [--dtype f16]   # export a training checkpoint
"""
import argparse
import json
import os
import struct
import sys

import torch

from model import Config, Model

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32}
NAMES = {v: k for k, v in DTYPES.items()}
CONFIG_INTS = ("n_layers", "n_heads", "d_head", "d_ff", "n_mix", "height", "width", "channels")


def tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bf16: go through int16
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata):
    """tensors: dict name -> tensor (written in the given order); metadata: dict str -> str."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, off = [], 0
    for name, t in tensors.items():
        b = tensor_bytes(t)
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)  # align the data to 8 bytes
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """-> (dict name -> tensor in its stored dtype, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        dt = DTYPES[info["dtype"]]
        raw = bytearray(data[base + a:base + b])
        if dt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dt)
        out[name] = t.reshape(info["shape"])
    return out, meta


def config_metadata(cfg):
    m = {"format": "lingen", "format_version": "1", "bos": "1"}
    for k, v in cfg.as_dict().items():
        m[k] = str(v)
    return m


def config_from_metadata(meta):
    kw = {k: int(meta[k]) for k in CONFIG_INTS}
    for k in ("attention", "norm", "activation", "dataset"):
        kw[k] = meta[k]
    return Config(**kw)


def export(model, path, provenance=None, dtype=torch.float32):
    """Write a model (its state_dict, in the model file's names) with its config and provenance."""
    meta = config_metadata(model.cfg)
    meta.update({k: str(v) for k, v in (provenance or {}).items()})
    sd = model.state_dict()
    tensors = {k: v.to(dtype) for k, v in sd.items()}
    write_safetensors(path, tensors, meta)


def load(path, dtype=torch.float32, **options):
    """Model file -> (Model in eval mode with weights widened to dtype, metadata).
    options: Model's training options (dropout, attn_dropout, chunk, mixed_attention)."""
    tensors, meta = read_safetensors(path)
    cfg = config_from_metadata(meta)
    m = Model(cfg, **options)
    m.load_state_dict({k: v.to(dtype) for k, v in tensors.items()})
    return m.to(dtype).eval(), meta


def main():
    ap = argparse.ArgumentParser(description="export a training checkpoint (train.py --ckpt: its raw, not its "
                                             "averaged, weights) to a lingen model file, with the recipe it records")
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    a = ap.parse_args()
    ck = torch.load(a.checkpoint, map_location="cpu")
    m = Model(Config(**ck["config"]))
    m.load_state_dict(ck["model"])
    export(m, a.out, ck.get("provenance"), DTYPES[a.dtype.upper()])
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
