"""One run: the one run path of both front ends (session: plan, data, run_one) and the run loop that measures it
(warm-up apart, synchronized windows, losses fetched once per window).

Owns: session, trainer (RunLoop: every clock read and sync) and its parts: setup (all before the first step),
steps (the step functions, optimizer), windows (a measured window's bookkeeping), epochs (validation, early stop,
the best epoch), failures (one sentence per ending). Uses: analysis, machine, data, models, basics.
"""
