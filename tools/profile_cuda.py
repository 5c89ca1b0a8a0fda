"""Where the GPU time of lingen's sampling goes: every CUDA kernel a run launches (those of its
step graphs included), timed by PyTorch's profiler (CUPTI) around one `Model.sample` call of
the Python module, summed by kernel name.

    LINGEN_LIBRARY=build-cuda/liblingen.so.0 PYTHONPATH=python \\
        python3 tools/profile_cuda.py models/mnist.bin --batch 16384 [--images N] [--top 20]

Needs a GPU machine with PyTorch built for CUDA and liblingen built with `make CUDA=1 lib`.
Prints each kernel's total time, its share of all kernels' time, its launches and its time a
step (one position of the batch), then the run's wall time.
"""
import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

import lingen


def gpu_us(event):
    """An averaged event's total GPU time in microseconds (device_time_total on PyTorch 2)."""
    return getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=16384)
    ap.add_argument("--images", type=int, default=0, help="images to draw (default: one batch)")
    ap.add_argument("--top", type=int, default=20, help="kernels to list")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_cuda.py: no CUDA device for PyTorch")
    n = a.images or a.batch
    m = lingen.Model(a.model, device="cuda")
    steps = m.info["seq_len"] * -(-n // a.batch)   # positions of every batch drawn
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.time()
        m.sample(n, batch=a.batch)
        wall = time.time() - t0
    events = [e for e in prof.key_averages() if gpu_us(e) > 0]
    total = sum(gpu_us(e) for e in events)
    if not total:
        raise SystemExit("profile_cuda.py: the profiler saw no kernel (CUPTI unavailable?)")
    print(f"{a.model}: {n} images at batch {a.batch}, {steps} steps, kernels {total / 1e6:.3f} s of GPU time, "
          f"{total / steps:.1f} us a step")
    print(f"{'kernel':<60} {'total s':>9} {'share':>6} {'launches':>9} {'us/step':>9}")
    for e in sorted(events, key=gpu_us, reverse=True)[:a.top]:
        print(f"{e.key[:60]:<60} {gpu_us(e) / 1e6:9.3f} {100 * gpu_us(e) / total:5.1f}% {e.count:9d} "
              f"{gpu_us(e) / steps:9.1f}")
    print(f"wall {wall:.2f} s ({n / wall:.0f} images/s, engine creation and graph capture included)")


if __name__ == "__main__":
    main()
