"""Run processes: every run, tool and model check in a process of its own (spawned), its events over a pipe, checked
before a front end reads them; Stop, time limits, crashes, the spare process that hides `import torch`.

Owns: isolation. Uses: run, tools, analysis, basics.
"""
