"""One of two processes (RANK 0 or 1) that join a gloo group N times and leave it as
scripts/train.py does: a DistributedDataParallel step, the loss agreed in an all-reduce of a
Python tensor (train.synced), then train.leave (which exits with 1 after 60 s stuck in the
teardown). Prints "left N groups" at the end.
Usage: RANK=r python3 ddp_leave.py FOLDER N   (FOLDER: for the groups' file stores)"""
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import train  # noqa: E402

rank, folder, n = int(os.environ["RANK"]), sys.argv[1], int(sys.argv[2])
model = torch.nn.Linear(4, 4)
for i in range(n):
    dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, f'store{i}')}", rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=60))
    fns = [DistributedDataParallel(model)]
    loss = fns[0](torch.randn(2, 4)).sum()
    loss.backward()
    train.synced(loss, (0.0,), rank, 2)
    train.leave(fns, 60)
print(f"left {n} groups", flush=True)
