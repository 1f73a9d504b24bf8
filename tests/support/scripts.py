"""A user's training script run by `mpsstudio run` (the hostile and nothing-lost suites): a template tracked with
`mpsstudio.track`, and one run of a script text on the CPU."""

from __future__ import annotations

from mpsstudio import cli
from mpsstudio.engine.basics.results import RunResult
from mpsstudio.engine.history.store import RunStore

# {n}: the steps; {call}: the line at the end of each step (the mt.step under test)
MT = ("import torch\nimport mpsstudio.track as mt\nfrom torch import nn\nm = nn.Linear(4, 3)\n"
      "opt = torch.optim.SGD(m.parameters(), lr=0.01)\nfor i in range({n}):\n    loss = m(torch.randn(8, 4)).square().mean()\n"
      "    opt.zero_grad(); loss.backward(); opt.step()\n    {call}\n")


def tracked_run(tmp_path, text: str, *extra: str) -> tuple[int, RunResult]:
    """`mpsstudio run train.py --devices cpu --warmup 2 ...` of `text`: its exit code and the run it kept."""
    path = tmp_path / "train.py"
    path.write_text(text)
    code = cli.main(["run", str(path), "--devices", "cpu", "--warmup", "2", *extra])
    return code, RunStore().all()[-1]
