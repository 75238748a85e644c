# SPDX-License-Identifier: MIT
"""A 1-rank NCCL job on one GPU (real NCCL refuses two ranks on one GPU):
torch.distributed with the NCCL backend, world size 1, N all-reduces of a
1 MiB tensor, each followed by a synchronization. Prints one JSON line:
{"pid", "iters", "bytes"}. For tests/gpu/nccl.sh."""
import json
import os
import sys

import torch
import torch.distributed as dist

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.ones(256 * 1024, device="cuda")          # 1 MiB of float32
for _ in range(iters):
    dist.all_reduce(x)
    torch.cuda.synchronize()
dist.destroy_process_group()
print(json.dumps({"pid": os.getpid(), "iters": iters, "bytes": x.numel() * 4}), flush=True)
