"""The compiled part of cmrkit: the TREC run and qrels reader (cmrkit/_trecread.c).

Everything else is configured in pyproject.toml. The extension is optional: where it cannot be
built (no C compiler), the install goes on and cmrkit reads the files with numpy instead, with
the same results.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "cmrkit/_trecread.c"
# the module records the sha256 of the source it was built from: cmrkit.trec refuses to use a
# build older than the source beside it (an editable install after a `git pull`)
DIGEST = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "cmrkit._trecread",
            [SOURCE],
            define_macros=[("CMRKIT_TRECREAD_SHA256", f'"{DIGEST}"')],
            optional=True,
        )
    ]
)
