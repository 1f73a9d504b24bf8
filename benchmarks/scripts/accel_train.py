"""A training script that picks its own device as PyTorch's examples do (pytorch/examples' `--accel`:
`torch.accelerator.is_available()` and `current_accelerator()`), else as many scripts do (`"cuda" if
torch.cuda.is_available() else "cpu"`). It prints the device it trains on. Used to check that a run for the CPU trains
on the CPU (benchmarks/cuda_script.sh). Synthetic data: nothing is downloaded.

    python benchmarks/scripts/accel_train.py [--accel] [--steps 300]
"""

import argparse

import torch
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--accel", action="store_true", help="use the accelerator torch.accelerator reports")
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args()
    if a.accel and torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"training on {device}", flush=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x = torch.randn(64, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (64,), device=device)
    for step in range(a.steps):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
