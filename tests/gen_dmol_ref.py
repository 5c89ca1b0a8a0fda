"""Write tests/fixtures/dmol_ref.txt: log p(x), x = 0..255, from the PyTorch reference
(scripts/model.py dmol_pmf, float64 from float32 head outputs), for tests/test_dmol.c.

Each line: M, then the 3M head outputs (float32 values), then 256 natural-log probabilities,
all in %.17g so that C reads back the exact doubles.

    /usr/bin/python3 tests/gen_dmol_ref.py [tests/fixtures/dmol_ref.txt]
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from model import dmol_log_prob  # noqa: E402


def case(logits, mu, log_s):
    return torch.tensor(list(logits) + list(mu) + list(log_s), dtype=torch.float32)


def cases():
    g = torch.Generator().manual_seed(1234)
    out = []
    # ordinary head outputs, several mixture sizes
    for M in (1, 2, 5, 10, 10, 10):
        logits = torch.randn(M, generator=g) * 2
        mu = torch.rand(M, generator=g) * 2.4 - 1.2
        log_s = torch.rand(M, generator=g) * 6 - 6
        out.append(case(logits, mu, log_s))
    # sharp: log-scale at and below the clamp, means on and between bin centres and edges
    out.append(case([0.0], [0.3], [-7.0]))
    out.append(case([0.0], [0.3], [-12.0]))                        # clamped to -7
    out.append(case([0.0], [1.0 / 255], [-7.0]))                   # on a bin edge (c of 127.5)
    out.append(case([0.0, 0.0], [-1.0, 1.0], [-7.0, -7.0]))         # on the edge bins' centres
    out.append(case([0.5, -0.5], [-0.999, 0.995], [-6.5, -5.0]))
    # broad: large log-scales
    out.append(case([0.0], [0.0], [5.0]))
    out.append(case([1.0, -1.0, 0.0], [0.2, -0.4, 0.9], [5.0, 2.0, 0.0]))
    # means far outside [-1, 1]
    out.append(case([0.0], [30.0], [-7.0]))
    out.append(case([0.0], [-30.0], [-7.0]))
    out.append(case([0.0, 0.0], [30.0, -30.0], [-3.0, 1.0]))
    # logits with a huge spread
    M = 10
    logits = torch.linspace(-1e3, 1e3, M)
    mu = torch.rand(M, generator=g) * 2 - 1
    log_s = torch.rand(M, generator=g) * 5 - 7
    out.append(case(logits, mu, log_s))
    out.append(case([1e3, -1e3, 999.0], [0.1, -0.5, -0.2], [-7.0, -2.0, -4.0]))
    # a scale so large that inv_s underflows to 0 in double: interior bins get log p = -inf
    out.append(case([0.0], [0.0], [800.0]))
    # everything at once
    M = 10
    logits = torch.randn(M, generator=g) * 300
    mu = torch.randn(M, generator=g) * 20
    log_s = torch.randn(M, generator=g) * 6
    out.append(case(logits, mu, log_s))
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "dmol_ref.txt")
    x = torch.arange(256)
    with open(path, "w") as f:
        for out in cases():
            M = out.numel() // 3
            logp = dmol_log_prob(out.double().expand(256, -1), x)
            vals = [float(v) for v in out.tolist()] + logp.tolist()
            f.write("%d %s\n" % (M, " ".join("%.17g" % v for v in vals)))
    print("wrote", path, "(%d cases)" % len(cases()))


if __name__ == "__main__":
    main()
