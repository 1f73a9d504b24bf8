"""Generation speed of a language model folder (`mpsstudio generate`, Tools ▸ Generation Speed…): timing.py
measures prefill, decode and the time to the first token on each device and precision; words.py says them."""
