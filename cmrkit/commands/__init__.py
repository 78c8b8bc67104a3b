"""One module per command group; each exposes ``register(app)``.

Modules here import only light things at module level (typer, rich, the standard library):
heavy libraries (Pyserini and the JVM, spaCy, torch) are imported inside the command bodies.
"""
