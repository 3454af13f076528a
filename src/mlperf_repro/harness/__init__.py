"""The LoadGen side: QSL over a token dataset, an LLM SUT over a backend, one test per process."""
