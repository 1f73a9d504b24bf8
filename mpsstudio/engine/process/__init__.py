"""Run processes: every run, tool and model check in a process of its own (spawned), its events over a pipe, checked
before a front end reads them; Stop, time limits, crashes, and the spare process that hides `import torch`.

Owns: child (the child's side), messages (what may cross the pipe, checked), handles (RunProcess, the
`new_process` seam), in_process (InProcessRun: a thread serving as a run process, for tests), spare, warm (a tune's candidates one after another in one process), runs (run_isolated, run_point), asks (probe_model,
run_tool, check_devices), series (a tool's points, a sweep or a tune, in one process after another), interpreter
(another Python environment's runs), rank (a torchrun rank's entry), ending (SIGTERM / SIGHUP to a front end, handled as Ctrl-C), leftovers (what a model started ends
with its run), output (a child's stdout/stderr through a pipe, capped), journal (a run in progress kept for a
front end that is killed; the next start keeps it as interrupted).
Uses: run, tools, analysis, machine, basics. This package imports no torch: a child sets its environment first.
The names below are the package's face, what the front ends call.
"""

from .asks import PROBE_TIMEOUT_S, check_devices, probe_model, run_tool
from .child import FALLBACK_VAR, MEMORY_LIMIT_VAR
from .ending import ending_signals
from .handles import RunProcess, live_processes
from .in_process import InProcessRun
from .runs import STOP_GRACE_S, run_isolated, run_point
from .spare import Spare
from .warm import Warm

__all__ = ["FALLBACK_VAR", "MEMORY_LIMIT_VAR", "PROBE_TIMEOUT_S", "STOP_GRACE_S", "InProcessRun", "RunProcess", "Spare", "Warm",
           "check_devices", "ending_signals", "live_processes", "probe_model", "run_isolated", "run_point", "run_tool"]
