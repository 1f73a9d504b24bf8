"""Model files that misbehave on purpose."""

from __future__ import annotations


MODEL = '''import ctypes, os, signal, sys, time
import torch
{body}
class M(torch.nn.Module):
    def __init__(self, n, shape):
        super().__init__()
        {init}
        self.l = torch.nn.Linear(shape[0] * shape[1] * shape[2], n)
    def forward(self, x):
        {forward}
        return self.l(x.flatten(1))
def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
'''


# name: (module body, __init__, forward)
BAD = {
    "abort": ("", "pass", "os.abort()"),
    "segfault": ("", "pass", "ctypes.string_at(0)"),
    "sys_exit": ("", "pass", "sys.exit(3)"),
    "os_exit": ("", "pass", "os._exit(0)"),
    "killed": ("", "pass", "os.kill(os.getpid(), signal.SIGKILL)"),
    "memory": ("", "pass", "globals().setdefault('hog', []).extend(bytearray(1 << 26) for _ in range(1 << 16))"),
    "keyboard_interrupt": ("", "pass", "raise KeyboardInterrupt('not the user')"),
    "base_exception": ("class Weird(BaseException): pass", "pass", "raise Weird()"),
    "loop_in_body": ("while True: pass", "pass", "pass"),
    "loop_in_forward": ("", "pass", "while True: pass"),
    "sleep_in_init": ("", "time.sleep(600)", "pass"),
}


def bad_model(tmp_path, name: str) -> str:
    body, init, forward = BAD[name]
    path = tmp_path / f"{name}.py"
    path.write_text(MODEL.format(body=body, init=init, forward=forward))
    return str(path)

