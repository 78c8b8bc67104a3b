"""From command-line inputs (source name, paths, distractor files) to mentions and streams."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cmrkit.collection.build import DistractorSource, InputFile
from cmrkit.errors import CmrkitError
from cmrkit.model import Mention
from cmrkit.sources.common import parse_input_spec, split_from_name
from cmrkit.sources.distractors import detect_format, file_tag, iter_distractors

SOURCES = ("wec-eng", "coresearch", "jsonl", "hf", "ecbplus", "ucdcr")


@dataclass
class Loaded:
    source: str
    mentions: list[Mention]
    distractors: list[DistractorSource]
    inputs: list[InputFile]
    default_name: str = "collection"
    notes: list[str] = field(default_factory=list)
    query_ids: set[str] | None = None  # the source's own query list, when it has one


def _display(path: str | os.PathLike, sample: bool) -> str:
    return f"cmrkit:data/sample/{os.path.basename(str(path))}" if sample else str(path)


def load_inputs(
    source: str,
    inputs: list[str],
    distractors: list[str],
    *,
    distractor_format: str = "auto",
    hf_dataset: str = "wec-eng",
    hf_splits: str = "dev,test",
    revision: str = "main",
    hf_cache_dir: str | None = None,
    sample: bool = False,
    kind: str = "events",
    validated: str | None = None,
) -> Loaded:
    """Read the annotated inputs and open the distractor streams for a source (``kind`` and
    ``validated``: which mentions of a cross-document coreference corpus, and ECB+'s
    validated-sentences file)."""
    if source not in SOURCES:
        raise CmrkitError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    if source in ("ecbplus", "ucdcr"):
        loaded = _read_corpus(source, inputs, kind, validated)
        loaded.distractors, loaded.inputs = _distractors(
            distractors, distractor_format, sample, loaded.inputs
        )
        return loaded
    records: list[InputFile] = []
    specs = [parse_input_spec(s) for s in inputs]
    from_hub = source == "hf"
    if source == "hf":
        source, specs = _from_hub(hf_dataset, hf_splits, revision, hf_cache_dir, records)
    elif not specs:
        raise CmrkitError(f"--source {source} needs at least one --input file")
    elif source != "coresearch":  # coresearch inputs (folders too) are recorded once resolved
        for s, p in specs:
            records.append(
                InputFile.of(
                    p,
                    "annotated",
                    _display(p, sample),
                    split=s or split_from_name(p),
                    format=source,
                )
            )

    mentions: list[Mention] = []
    streams: list[DistractorSource] = []
    notes: list[str] = []
    query_ids: set[str] | None = None
    if source == "wec-eng":
        from cmrkit.sources.wec import read_wec

        for s, p in specs:
            mentions.extend(read_wec(p, s or split_from_name(p)))
    elif source == "jsonl":
        from cmrkit.sources.jsonl import read_jsonl

        for s, p in specs:
            mentions.extend(read_jsonl(p, s or split_from_name(p)))
    elif source == "coresearch":
        query_ids = _read_coresearch(specs, from_hub, sample, records, mentions, streams, notes)

    more, records = _distractors(distractors, distractor_format, sample, records)
    streams.extend(more)

    default_name = file_tag(specs[0][1]).lower() if specs else "collection"
    if source == "coresearch":
        splits = sorted({m.split for m in mentions if m.split})
        default_name = "coresearch" + (f"-{splits[0]}" if len(splits) == 1 else "")
    return Loaded(
        source,
        mentions,
        streams,
        records,
        default_name=default_name,
        notes=notes,
        query_ids=query_ids,
    )


def _from_hub(
    dataset: str, splits: str, revision: str, cache_dir: str | None, records: list[InputFile]
) -> tuple[str, list[tuple[str | None, str]]]:
    """Download the dataset's splits from the Hugging Face hub: their format (the source that
    reads them) and (split, path) specs; each file is recorded with the commit it came from."""
    from cmrkit.sources import hub

    fmt, files = hub.download(
        dataset, [s.strip() for s in splits.split(",") if s.strip()], revision, cache_dir
    )
    for s, p in files:
        records.append(
            InputFile.of(
                str(p), "annotated", split=s, format=f"hf:{dataset}@{hub.resolved_commit(p)}"
            )
        )
    return fmt, [(s, str(p)) for s, p in files]


def _read_coresearch(
    specs: list[tuple[str | None, str]],
    from_hub: bool,
    sample: bool,
    records: list[InputFile],
    mentions: list[Mention],
    streams: list[DistractorSource],
    notes: list[str],
) -> set[str] | None:
    """Read CoreSearch splits (dataset folders or files) into ``mentions``, their other
    passages into ``streams`` as distractors; returns the query ids of the splits' query files
    (None when no split has one: every annotated passage is then a query)."""
    from cmrkit.sources import coresearch

    resolved = coresearch.resolve(specs)
    query_ids: set[str] = set()
    for files in resolved:
        for role, path in (
            ("annotated", files.clusters),
            ("annotated", files.passages),
            ("queries", files.queries),
        ):
            if path is not None and not from_hub:
                records.append(
                    InputFile.of(
                        path, role, _display(path, sample), split=files.split, format="coresearch"
                    )
                )
        found, rest, ids = coresearch.read_coresearch(
            files.clusters, files.passages, files.split, files.queries
        )
        mentions.extend(found)
        streams.append(DistractorSource(name=str(files.passages), passages=rest))
        # a split without a queries file: every annotated passage is a query
        query_ids.update(ids if ids is not None else (m.mention_id for m in found))
    if len(resolved) > 1:
        notes.append(
            f"{len(resolved)} CoreSearch splits ({', '.join(f.split for f in resolved)}) "
            "share one corpus here; CoreSearch searches each split in its own passages: "
            "for its exact corpora build one collection per split (--input dev=FOLDER)"
        )
    if not any(f.queries for f in resolved):
        return None
    return query_ids


def _distractors(
    distractors: list[str], distractor_format: str, sample: bool, records: list[InputFile]
) -> tuple[list[DistractorSource], list[InputFile]]:
    """The distractor streams, and the input records with theirs added."""
    streams: list[DistractorSource] = []
    records = list(records)
    for d in distractors:
        fmt = distractor_format if distractor_format != "auto" else detect_format(d)
        records.append(InputFile.of(d, "distractors", _display(d, sample), format=fmt))
        streams.append(
            DistractorSource(
                name=d,
                passages=iter_distractors(d, fmt),
                count=lambda d=d, fmt=fmt: sum(1 for _ in iter_distractors(d, fmt)),
            )
        )
    return streams, records


def _read_corpus(source: str, inputs: list[str], kind: str, validated: str | None) -> Loaded:
    """A cross-document coreference corpus: the ECB+ release (one zip or folder) or uCDCR's
    unified files (folders or files), its mentions split as the corpus splits them."""
    if not inputs:
        raise CmrkitError(f"--source {source} needs --input (the release or the dataset folder)")
    suffix = "" if kind == "events" else f"-{kind}"
    if source == "ecbplus":
        from cmrkit.sources import ecbplus

        if len(inputs) > 1:
            raise CmrkitError(
                "--source ecbplus reads one release: give -i ECB+.zip (or its folder) once"
            )
        path = inputs[0]
        read = ecbplus.read_ecbplus(path, kind=kind, validated=validated)
        records = [
            InputFile(
                path=path,
                role="annotated",
                sha256=ecbplus.release_sha256(path),
                format=f"ecbplus:{kind}",
            )
        ]
        own = ecbplus.validated_file(path, validated)
        if own is not None:
            records.append(InputFile.of(own, "validated", format="ecbplus-sentences"))
        elif read.validated is not None:
            read.notes.append(f"validated sentences: the release's copy, {read.validated}")
        return Loaded(source, read.mentions, [], records, f"ecbplus{suffix}", read.notes)
    if validated is not None:
        raise CmrkitError("--validated is for --source ecbplus (ECB+'s sentences file)")
    from cmrkit.sources import ucdcr

    files = []
    for spec in inputs:
        split, path = parse_input_spec(spec)
        for f in ucdcr.resolve(path, kind):
            files.append(type(f)(f.path, split or f.split, f.kind) if split else f)
    records = [
        InputFile.of(f.path, "annotated", split=f.split, format=f"ucdcr:{f.kind}") for f in files
    ]
    mentions = ucdcr.read_ucdcr(files)
    first = os.path.abspath(parse_input_spec(inputs[0])[1])
    while os.path.basename(first).lower() in ("train", "val", "dev", "test") or os.path.isfile(
        first
    ):
        first = os.path.dirname(first)
    name = file_tag(os.path.basename(first) or "ucdcr").lower()
    return Loaded(source, mentions, [], records, f"{name}{suffix}")
