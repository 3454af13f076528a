"""The embedded demo: a small Llama-architecture model and an OpenOrca-shaped dataset,
both built locally and deterministically from a seed, so the whole pipeline runs on a
laptop with no hub access."""
