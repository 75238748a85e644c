# SPDX-License-Identifier: MIT
"""A PyTorch training loop started plainly (no cgbpf variable in its
environment), for tests/gpu/inject.sh: runs --seconds, printing its step
rate once a second ("rate UNIX_TIME STEPS_PER_S"), so the rate before,
during and after an injected capture can be compared."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--comm", help="the process's name (/proc/self/comm), set before "
                    "CUDA is loaded: what cgbpf's --comm matches")
    a = ap.parse_args()
    if a.comm:
        with open("/proc/self/comm", "w") as f:
            f.write(a.comm)
    import torch
    if not torch.cuda.is_available():
        sys.exit("inject_loop: torch.cuda.is_available() is False")
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
    t0 = time.monotonic()
    mark, n, total = t0, 0, 0
    print("ready", flush=True)
    while time.monotonic() - t0 < a.seconds:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        n += 1
        if n % 20 == 0:
            torch.cuda.synchronize()
            now = time.monotonic()
            if now - mark >= 1.0:
                print("rate %.3f %.1f" % (time.time(), n / (now - mark)), flush=True)
                total += n
                mark, n = now, 0
    torch.cuda.synchronize()
    print("done %d steps, loss %.4f" % (total + n, loss.item()), flush=True)


if __name__ == "__main__":
    main()
