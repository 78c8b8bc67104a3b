"""cmrkit: build, run, pool and score coreference-search test collections."""

__version__ = "0.1.0"
