"""``make_judge``: the judge of a ``--judge`` spec with its options, the one place a judge of any
kind is built (``judgments auto``, ``bench/bench_judge.py``, the Python API), as
``RunOptions`` is for runs. Each judge's module is imported only when that judge is made."""

from __future__ import annotations

from cmrkit.judgments.auto.judges import Judge, JudgeSpec
from cmrkit.judgments.auto.options import JudgeOptions


def make_judge(spec: JudgeSpec | str, options: JudgeOptions | None = None) -> Judge:
    """The judge ``spec`` names (``reader:DIR``, ``llm:URL``, ``llm:local``, or a parsed
    :class:`JudgeSpec`), made with ``options`` (the defaults when None). What can be refused
    before any work is: the options (:meth:`JudgeOptions.check`), a folder that is no reader,
    an absent llama-cpp-python or model package."""
    spec = JudgeSpec.parse(spec) if isinstance(spec, str) else spec
    options = options if options is not None else JudgeOptions()
    options.check(spec.kind)
    if spec.kind == "reader":
        from cmrkit.judgments.auto.reader import ReaderJudge

        reader = options.reader
        return ReaderJudge(
            spec.target,
            device=reader.device,
            batch_size=reader.batch_size,
            precision=reader.precision,
        )
    if spec.kind == "llm-local":
        from cmrkit.judgments.auto.local import LocalJudge

        return LocalJudge(options.llm)
    from cmrkit.judgments.auto.llm import endpoint_judge

    return endpoint_judge(spec.target, options.model, options.llm)
