"""A plain PyTorch training script, measured by MPS Studio with two lines (`import mpsstudio.track as mt`,
`mt.step(...)`). Run it as it is (`python examples/train_script.py`: the run is kept in MPS Studio's history and
its summary printed), or compare it across devices: `mpsstudio run examples/train_script.py --devices cpu,mps
--steps 60`. Nothing here is downloaded: the data is generated."""

import argparse

import torch
from torch import nn

import mpsstudio.track as mt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    device = mt.device()  # the device MPS Studio runs this for, or the best one here
    torch.manual_seed(0)
    x = torch.randn(4096, 32)
    y = (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4:8].sum(1) > 0).long()  # four classes a model can learn
    data = torch.utils.data.TensorDataset(x, y)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True)
    model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(loader))
    for _ in range(args.epochs):
        model.train()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.cross_entropy(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            mt.step(loss, batch_size=xb.shape[0])  # the loss stays on the device: read once a window
        model.eval()
        with torch.no_grad():
            logits = model(x[:512].to(device))
            accuracy = (logits.argmax(1).cpu() == y[:512]).float().mean().item()
        mt.epoch(val_accuracy=accuracy)


if __name__ == "__main__":
    main()
