# SPDX-License-Identifier: MIT
"""torch_step: a small PyTorch training loop on CUDA for tests/gpu (run.sh
records it under cgbpf; check.py checks the trace).

An MLP (512 -> 1024 -> 1024 -> 10, ReLU) with AdamW and cross entropy:
forward, backward and an optimizer step per iteration, then
torch.cuda.synchronize(). The first iteration (allocator, cuBLAS handles,
kernel loading) runs before CGBPF_PAUSE_FILE (the same protocol as
kernels.cu: "<file>.ready" is created, then the file is awaited), the
checked iterations after it.

Manifest (CGBPF_MANIFEST): {"program": "torch_step", "pid", "device",
"torch", "cuda", "iters", "batch", "loss_first", "loss_last",
"checked_from_ns", "checked_until_ns" (CLOCK_BOOTTIME span of the checked
iterations)}.

Usage: python3 torch_step.py [--iters N]   (default 20)
"""
import argparse
import json
import os
import sys
import time


def pause_point():
    path = os.environ.get("CGBPF_PAUSE_FILE")
    if not path:
        return
    with open(path + ".ready", "w"):
        pass
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit("torch_step: %s did not appear within 120 s" % path)
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--kineto", action="store_true",
                    help="run the checked iterations under torch.profiler (CPU and CUDA "
                    "activities), the peer bench/torch_gpu.sh compares cgbpf with")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_step: torch.cuda.is_available() is False (torch %s, built for CUDA %s)"
                 % (torch.__version__, torch.version.cuda))
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 512, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    first = step().item()
    torch.cuda.synchronize()
    pause_point()
    prof = None
    if a.kineto:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
    t_from = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    last = None
    for _ in range(a.iters):
        last = step()
    torch.cuda.synchronize()
    t_until = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    if prof is not None:
        prof.__exit__(None, None, None)
    last = last.item() if last is not None else first
    out = os.environ.get("CGBPF_MANIFEST")
    if out:
        m = {"program": "torch_step", "pid": os.getpid(),
             "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
             "cuda": torch.version.cuda, "iters": a.iters, "batch": a.batch,
             "loss_first": first, "loss_last": last,
             "checked_from_ns": t_from, "checked_until_ns": t_until}
        with open(out + ".tmp", "w") as f:
            json.dump(m, f, indent=1)
        os.replace(out + ".tmp", out)
    print("torch_step: %d iterations on %s, loss %.4f -> %.4f" %
          (a.iters, torch.cuda.get_device_name(0), first, last))


if __name__ == "__main__":
    main()
