"""Dataset readers for training and evaluation: images as uint8 [n, N], channels interleaved per pixel.

The directory holds the canonical files (see data/README.md), gzipped or not:
  mnist/{train-images-idx3-ubyte,t10k-images-idx3-ubyte}[.gz]
  cifar-10/{data_batch_1..5,test_batch}.bin[.gz]
"""
import gzip
import os

import numpy as np
import torch


def _read(path, size=-1):
    """The file's first `size` bytes (all: -1)."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            with (gzip.open(p) if p.endswith(".gz") else open(p, "rb")) as f:
                return f.read(size)
    raise FileNotFoundError(f"{path}[.gz] not found")


def mnist(root, split, limit=0):
    name = "train-images-idx3-ubyte" if split == "train" else "t10k-images-idx3-ubyte"
    raw = _read(os.path.join(root, "mnist", name), 16 + limit * 784 if limit else -1)
    magic, n, h, w = np.frombuffer(raw[:16], ">u4")
    assert magic == 0x803 and h == 28 and w == 28, f"{name}: not an MNIST idx3 image file"
    if limit:  # only the images needed were read
        n = min(n, limit)
    return torch.from_numpy(np.frombuffer(raw, np.uint8, n * h * w, 16).reshape(n, h * w).copy())


def cifar10(root, split, limit=0):
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if split == "train" else ["test_batch.bin"]
    if limit:  # 10,000 records per file: read only the files needed
        names = names[:(limit + 9999) // 10000]
    recs = [np.frombuffer(_read(os.path.join(root, "cifar-10", n)), np.uint8).reshape(-1, 3073) for n in names]
    planes = np.concatenate(recs)[:, 1:].reshape(-1, 3, 1024)      # R plane, G plane, B plane
    inter = planes.transpose(0, 2, 1).reshape(-1, 3072)            # R,G,B per pixel, row-major
    return torch.from_numpy(np.ascontiguousarray(inter))


def load(dataset, root, split, limit=0):
    imgs = mnist(root, split, limit) if dataset == "mnist" else cifar10(root, split, limit)
    return imgs[:limit] if limit else imgs


def default_root():
    return os.environ.get("LINGEN_DATA", "data")
