"""Write the fuzzers' seed corpora into fuzz/corpus/<target>/: tiny valid inputs.

    /usr/bin/python3 fuzz/make_seeds.py      # from the repository root; needs torch and PIL

Deterministic: rerunning it rewrites the same files. Every file stays a few KB at most,
so the fuzzers run fast and the corpus stays small in git.
"""
import gzip
import json
import os
import random
import struct
import sys
import zlib

import torch
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from model import Config, Model  # noqa: E402
import modelfile  # noqa: E402

CORPUS = os.path.join(ROOT, "fuzz", "corpus")
os.makedirs(CORPUS, exist_ok=True)
SEP = b"|NEXT|"   # fuzz_dataset.c: separates the files of one dataset


def out(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)  # mtime 0: the same bytes every run


# ---------------------------------------------------------------- model files

def models():
    tiny = dict(n_layers=1, n_heads=1, d_head=2, d_ff=2, n_mix=1)
    configs = [
        ("linear-mnist-f16", Config(attention="linear", **tiny), torch.float16),
        ("linear-mnist-f32", Config(attention="linear", **tiny), torch.float32),
        ("softmax-cifar-bf16", Config(attention="softmax", n_layers=2, n_heads=2, d_head=1, d_ff=2, n_mix=1,
                                      height=32, width=32, channels=3, norm="pre", activation="gelu",
                                      dataset="cifar10"), torch.bfloat16),
    ]
    tmp = os.path.join(CORPUS, "tmp.bin")
    for name, cfg, dtype in configs:
        torch.manual_seed(0)
        modelfile.export(Model(cfg), tmp, {"trained": "no", "note": "fuzz seed"}, dtype)
        with open(tmp, "rb") as f:
            out("model", name + ".bin", f.read())
        os.remove(tmp)
    # the reliability rules, each broken once in the F32 seed (model-format.md)
    with open(os.path.join(CORPUS, "model", "linear-mnist-f32.bin"), "rb") as f:
        seed = f.read()
    n = struct.unpack("<Q", seed[:8])[0]
    h, data = json.loads(seed[8:8 + n]), bytearray(seed[8 + n:])

    def edited(name, header, body):
        edited_text(name, json.dumps(header), body)

    def edited_text(name, text, body):
        hb = text.encode()
        hb += b" " * (-len(hb) % 8)
        out("model", name, struct.pack("<Q", len(hb)) + hb + bytes(body))

    nan = bytearray(data)
    struct.pack_into("<f", nan, h["head.bias"]["data_offsets"][0], float("nan"))
    edited("nan-head-bias.bin", h, nan)
    edited("trailing-bytes.bin", h, data + b"\0" * 8)
    overlap = json.loads(json.dumps(h))
    overlap["extra"] = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    edited("overlapping-tensors.bin", overlap, data)
    # the last tensor 4 bytes back into the one before it, the data 4 bytes shorter: the sizes
    # still add up to the data section, the ranges do not tile it
    partly = json.loads(json.dumps(h))
    begin, end = partly["head.bias"]["data_offsets"]
    partly["head.bias"]["data_offsets"] = [begin - 4, end - 4]
    edited("partly-overlapping-tensors.bin", partly, data[:-4])
    utf8 = json.loads(json.dumps(h))
    utf8["__metadata__"]["note"] = "caf\u00e9 \u6771 \\u0000 \x1b[2J"
    edited("utf8-metadata.bin", utf8, data)
    big = json.loads(json.dumps(h))
    big["__metadata__"].update(height="1024", width="1024")
    edited("side-1024.bin", big, data)
    four = json.loads(json.dumps(h))
    four["__metadata__"]["channels"] = "4"
    edited("channels-4.bin", four, data)
    # empty tensors that no config wants, listed before the weights
    extra = {"x%d" % i: {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(3)}
    edited("extra-tensors-first.bin", dict(extra, **h), data)
    # a key twice in one tensor entry: the valid shape first (cJSON keeps it), Python's json the last
    text = json.dumps(h)
    end = text.index("}", text.index('"head.bias": {'))
    edited_text("shape-twice.bin", text[:end] + ', "shape": [1, 3]' + text[end:], data)


# ---------------------------------------------------------------- MNIST and CIFAR-10

def datasets():
    rnd = random.Random(0)
    pixels = bytes(rnd.randrange(256) for _ in range(2 * 28 * 28))
    images = struct.pack(">IIII", 0x803, 2, 28, 28) + pixels
    labels = struct.pack(">II", 0x801, 2) + bytes([3, 7])
    # byte 0: bit 0 cifar10, bit 1 train, bit 2 .gz names; byte 1: limit (fuzz_dataset.c)
    out("dataset", "mnist-test-raw", bytes([0, 0]) + images + SEP + labels)
    out("dataset", "mnist-train-gz", bytes([2 | 4, 0]) + gz(images) + SEP + gz(labels))
    out("dataset", "mnist-test-mixed-limit1", bytes([0, 1]) + gz(images) + SEP + labels)
    record = lambda label: bytes([label]) + bytes(rnd.randrange(256) for _ in range(3 * 32 * 32))  # noqa: E731
    cifar = record(1) + record(9)
    out("dataset", "cifar-test-raw", bytes([1, 0]) + cifar)
    out("dataset", "cifar-test-gz", bytes([1 | 4, 0]) + gz(cifar))
    out("dataset", "cifar-train-2files-limit3", bytes([1 | 2, 3]) + gz(cifar) + SEP + record(0) + record(5))
    # fuzz_dataset.c makes a batch 2 records: 3 is too many; a gzip file must keep its trailer
    out("dataset", "cifar-test-3-records", bytes([1, 0]) + cifar + record(2))
    out("dataset", "cifar-test-gz-no-trailer", bytes([1 | 4, 1]) + gz(cifar)[:-8])
    out("dataset", "mnist-test-gz-bad-crc-limit1", bytes([4, 1]) + gz(images)[:-8] + b"\0" * 8 + SEP + gz(labels))
    out("dataset", "mnist-test-gz-junk-after", bytes([4, 0]) + gz(images) + b"junk" + SEP + labels)
    # a gzip file may be several members (split inside the second image here)
    out("dataset", "mnist-test-gz-two-members-limit1", bytes([4, 1]) + gz(images[:900]) + gz(images[900:])
        + SEP + gz(labels))


# ---------------------------------------------------------------- PNG

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_row(samples, depth):
    """Samples (ints < 2^depth) -> the bytes of one scanline, with filter type 0."""
    if depth == 16:
        return b"\0" + b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return b"\0" + bytes(samples)
    bits = "".join(format(s, "0%db" % depth) for s in samples)
    bits += "0" * (-len(bits) % 8)
    return b"\0" + bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png(w, h, color, depth, pixel, interlace=False, extra=b"", tail=b""):
    """A PNG by hand (PIL writes neither 16-bit RGB nor interlaced files): pixel(x, y) -> samples.
    tail: bytes more in the zlib stream, after the rows."""
    raw = b""
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    for x0, y0, dx, dy in passes:
        xs, ys = range(x0, w, dx), range(y0, h, dy)
        if len(xs) and len(ys):
            raw += b"".join(pack_row([s for x in xs for s in pixel(x, y)], depth) for y in ys)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, int(interlace))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw + tail, 9))
            + chunk(b"IEND", b""))


def pngs():
    f = lambda x, y, k=0: (x * 37 + y * 11 + k * 71) % 256  # noqa: E731
    out("png", "gray8-28x28.png", png(28, 28, 0, 8, lambda x, y: [f(x, y)]))
    out("png", "rgb8-32x32.png", png(32, 32, 2, 8, lambda x, y: [f(x, y, k) for k in range(3)]))
    out("png", "rgba8-5x4.png", png(5, 4, 6, 8, lambda x, y: [f(x, y, k) for k in range(4)]))
    out("png", "graya8-3x3.png", png(3, 3, 4, 8, lambda x, y: [f(x, y), f(x, y, 1)]))
    out("png", "gray16-4x3.png", png(4, 3, 0, 16, lambda x, y: [f(x, y) * 257 + x]))
    out("png", "rgb16-3x2.png", png(3, 2, 2, 16, lambda x, y: [f(x, y, k) * 255 for k in range(3)]))
    out("png", "gray1-9x2.png", png(9, 2, 0, 1, lambda x, y: [(x + y) % 2]))
    out("png", "gray4-interlaced-9x9.png", png(9, 9, 0, 4, lambda x, y: [(x * y) % 16], interlace=True))
    out("png", "rgb8-interlaced-6x5.png", png(6, 5, 2, 8, lambda x, y: [f(x, y, k) for k in range(3)], True))
    plte = chunk(b"PLTE", bytes(range(12)))
    trns = chunk(b"tRNS", bytes([0, 128, 255]))
    out("png", "palette2-trns-5x3.png", png(5, 3, 3, 2, lambda x, y: [(x + y) % 4], extra=plte + trns))
    out("png", "gray8-trns-gamma-4x4.png", png(4, 4, 0, 8, lambda x, y: [f(x, y)],
                                              extra=chunk(b"gAMA", struct.pack(">I", 45455)) +
                                              chunk(b"tRNS", struct.pack(">H", 0))))
    # a decompression bomb in small: 4x4 pixels, then 1 MB more in the same stream
    out("png", "gray8-4x4-1mb-more.png", png(4, 4, 0, 8, lambda x, y: [f(x, y)], tail=bytes(1 << 20)))
    # one written by PIL, as a user's editor would: palette mode with its own chunk layout
    im = Image.new("P", (6, 6))
    im.putpalette(bytes(range(48)))
    im.putdata([(x * y) % 16 for y in range(6) for x in range(6)])
    tmp = os.path.join(CORPUS, "tmp.png")
    im.save(tmp, optimize=False)
    with open(tmp, "rb") as fh:
        out("png", "pil-palette-6x6.png", fh.read())
    os.remove(tmp)


# ---------------------------------------------------------------- argv lines

def args():
    lines = {
        "short-and-long": ["-n", "16", "--model", "m.bin", "-v"],
        "equals": ["--n=5", "--temperature=0.5", "--output=x.png"],
        "positional": ["pos1", "-", "pos2"],
        "help": ["-m", "x", "--help"],
        "int-limits": ["--seed", "9223372036854775807", "-n", "1000000"],
        "double": ["-T", "-1e-3", "--temperature", "inf"],
        "errors": ["--verbose=1", "-n", "0x10", "--bogus"],
        "missing-value": ["-m"],
        "empty-value": ["--output=", "-T", ""],
    }
    for name, argv in lines.items():
        out("args", name, b"\0".join(a.encode() for a in argv))


if __name__ == "__main__":
    models()
    datasets()
    pngs()
    args()
