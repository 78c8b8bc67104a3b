"""The compiled part of cmrkit: the TREC run and qrels reader (cmrkit/_trecread.c).

Everything else is configured in pyproject.toml. The extension is optional: where it cannot be
built (no C compiler), the install goes on and cmrkit reads the files with numpy instead, with
the same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cmrkit._trecread", ["cmrkit/_trecread.c"], optional=True)])
