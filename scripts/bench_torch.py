"""Time the PyTorch reference's step form (RNN mode) on the CPU, for `make bench`.

    python3 scripts/bench_torch.py models/mnist.bin --batch 64 --steps 50 --threads 2

Runs the first --steps positions of a sampling run (teacher-forced on random tokens: the cost
of a step does not depend on the values) and prints the seconds per position and the implied
images/s. For a linear model every position costs the same, so a prefix extrapolates to the
whole image; for a softmax model the step time grows and the figure covers the prefix only.
"""
import argparse
import json
import time

import torch

import modelfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m, _ = modelfile.load(a.model)
    N = m.cfg.seq_len
    steps = min(a.steps, N)
    tok = torch.randint(0, 256, (a.batch, steps))
    tok[:, 0] = 256
    with torch.no_grad():
        st = m.init_state(a.batch)
        m.step(tok[:, 0], 0, st)                       # warm-up
        st = m.init_state(a.batch)
        t0 = time.perf_counter()
        for t in range(steps):
            m.step(tok[:, t], t, st)
        secs = (time.perf_counter() - t0) / steps
    print(json.dumps({"model": a.model, "batch": a.batch, "threads": a.threads, "steps": steps,
                      "seconds_per_step": secs, "images_per_s": a.batch / (secs * N),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
