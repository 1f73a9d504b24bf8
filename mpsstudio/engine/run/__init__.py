"""One run: the one run path of both front ends (session: plan, data, run_one) and the run loop that measures it
(warm-up apart, synchronized windows, losses fetched once per window).

Owns: session, trainer. Uses: analysis, machine, data, models, basics.
"""
