# SPDX-License-Identifier: MIT
"""A 1-rank NCCL job on one GPU (real NCCL refuses two ranks on one GPU):
torch.distributed with the NCCL backend, world size 1, N all-reduces of a
1 MiB tensor, each followed by a synchronization and, with SLEEP_MS, a
pause (a job for `record -p` to attach to). Prints "ready PID" on stderr
after the first (its communicator exists then), then one JSON line on stdout: {"pid",
"iters", "bytes", "nccl"}. For tests/gpu/nccl.sh.

    nccl_loop.py [ITERS [SLEEP_MS]]"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
pause = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.0
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.ones(256 * 1024, device="cuda")          # 1 MiB of float32
for i in range(iters):
    dist.all_reduce(x)
    torch.cuda.synchronize()
    if i == 0:    # the communicator exists now (made at the first)
        print("ready %d" % os.getpid(), file=sys.stderr, flush=True)
    if pause:
        time.sleep(pause)
dist.destroy_process_group()
print(json.dumps({"pid": os.getpid(), "iters": iters, "bytes": x.numel() * 4,
                  "nccl": ".".join(str(v) for v in torch.cuda.nccl.version())}), flush=True)
