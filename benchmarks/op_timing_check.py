"""How to time one operation on a GPU (docs/benchmarks.md, "Diagnose"): the same linear layer's forward and backward
timed back to back (the truth: the device never idles), and one at a time with events around it, with the device
kept busy before the first event by a matrix product, by torch.cuda._sleep, or by nothing.
Usage (CUDA): python3 benchmarks/op_timing_check.py"""
import statistics
import time

import torch

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
for width, batch in ((1024, 2048), (1024, 8), (4096, 512)):
    layer = torch.nn.Linear(width, width).to(dev)
    x = torch.randn(batch, width, device=dev, requires_grad=True)

    def op():
        return layer(x)
    for _ in range(20):
        op()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        op()
    torch.cuda.synchronize()
    steady = (time.perf_counter() - t0) / 200
    pad = torch.ones(2048, 2048, device=dev)

    def evented(before):
        times = []
        for _ in range(50):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            before()
            s.record()
            op()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1000)
        return statistics.median(times)
    rows = {"steady (back to back)": steady,
            "events, nothing before": evented(lambda: None),
            "events, 2048 mm before": evented(lambda: torch.mm(pad, pad)),
            "events, cuda._sleep before": evented(lambda: torch.cuda._sleep(2_000_000))}
    print(f"linear {width} at batch {batch}: " + "; ".join(f"{k} {v * 1e6:.1f} us" for k, v in rows.items()))
