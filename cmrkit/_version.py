"""The package version, in a module of its own so that low layers need not import the face."""

__version__ = "0.1.0"
