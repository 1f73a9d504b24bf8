"""Energy and utilisation of the device a run uses, read at measurement windows' boundaries (docs/architecture.md,
"Energy and utilisation"): one interface (base.Counter, base.Busy) and a module per source: NVML (nvml), Apple's
IOReport and IORegistry (ioreport), RAPL (rapl), the CPU busy share (cpu); meter.Meter reads them over energy spans.

Owns: base, meter, nvml, ioreport, rapl, cpu. Uses: basics (it is part of machine: no torch here, the run loop
passes what it knows about the device).
"""
