"""The ECB+ 1.0 release as distributed (Cybulska & Vossen 2014): ``ECB+.zip`` or its unzipped
folder, ``ECB+/<topic>/<topic>_<n>ecb.xml`` and ``..._<n>ecbplus.xml``.

Each file holds its tokens (``<token t_id sentence number>``), its markables (a mention lists
``<token_anchor t_id>``; a markable without anchors is a chain's instance, carrying the chain's
tag) and its relations: ``CROSS_DOC_COREF`` (sources -> one instance target, ``note`` the
instance id: the chain, across documents) and ``INTRA_DOC_COREF`` (sources -> an instance of
this document only: the chain is made per document). A mention in no relation is a singleton.

Decisions, each counted on the release (docs/coreference.md):

- Where a mention's tag and its chain instance's differ, the chain's wins (the release's README:
  the coders' correction); the instances of ``INTRA_DOC_COREF`` chains are tagged
  ``UNKNOWN_INSTANCE_TAG``, which is no tag, so their mentions keep their own. Events are the
  ``ACTION_*`` and ``NEG_*`` tags, entities the others.
- The 89 markables on non-contiguous tokens stay mentions of their tokens (what the lemma
  baselines read); their retrieval span runs from their first token to their last.
- The one markable whose tokens cross a sentence boundary keeps the tokens of its first token's
  sentence.
- ``ECBplus_coreference_sentences.csv`` (Cybulska & Vossen 2015) keeps the mentions whose first
  token lies in a validated sentence; singletons are the chains with one mention among those kept.
"""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from cmrkit.errors import CmrkitError
from cmrkit.model import Cdcr, Mention
from cmrkit.sources.common import join_tokens

KINDS = ("events", "entities", "all")
DEV_TOPICS = frozenset({2, 5, 12, 18, 21, 23, 34, 35})
TEST_FROM = 36  # test topics 36-45; train 1-35 without the dev topics
VALIDATED = "ECBplus_coreference_sentences.csv"
NO_TAG = "UNKNOWN_INSTANCE_TAG"
_MEMBER = re.compile(r"(?:^|/)(\d+)/((\d+)_(\d+)(ecb|ecbplus))\.xml$")
_EVENT = ("ACTION", "NEG")


def split_of(topic: int) -> str:
    """The usual split of a topic (Cybulska & Vossen 2015)."""
    if topic >= TEST_FROM:
        return "test"
    return "dev" if topic in DEV_TOPICS else "train"


def is_event(tag: str) -> bool:
    return tag.startswith(_EVENT)


@dataclass
class EcbRead:
    """What the release gave: the mentions kept, the validated-sentences file used (None: every
    sentence kept) and notes on what was counted."""

    mentions: list[Mention]
    validated: str | None
    notes: list[str] = field(default_factory=list)


@dataclass
class _Markable:
    m_id: str
    tag: str
    anchors: list[str]


class _Release:
    """The XML members of the release, zip or folder, in topic, subtopic and number order."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self.zip: zipfile.ZipFile | None = None
        if os.path.isdir(path):
            names = [
                str(p.relative_to(path)).replace(os.sep, "/") for p in Path(path).rglob("*.xml")
            ]
        else:
            try:
                self.zip = zipfile.ZipFile(path)
            except (zipfile.BadZipFile, OSError) as e:
                raise CmrkitError(
                    f"is neither a zip file nor a folder ({e}); give the ECB+ release's "
                    "ECB+.zip or its unzipped folder",
                    path=path,
                ) from None
            names = self.zip.namelist()
        found = []
        for name in names:
            m = _MEMBER.search(name)
            if m is None or "__MACOSX" in name.split("/") or m.group(1) != m.group(3):
                continue
            found.append(((int(m.group(3)), m.group(5), int(m.group(4))), name, m.group(2)))
        if not found:
            raise CmrkitError(
                "is not the ECB+ release: no member TOPIC/TOPIC_Necb.xml or "
                "TOPIC/TOPIC_Necbplus.xml in it; give the release's ECB+.zip or its folder",
                path=path,
            )
        self.members = [(name, doc) for _, name, doc in sorted(found)]
        self.names = names

    def where(self, member: str) -> str:
        return f"{self.path}::{member}" if self.zip else os.path.join(self.path, member)

    def read(self, member: str) -> bytes:
        if self.zip is not None:
            return self.zip.read(member)
        return Path(self.path, member).read_bytes()

    def csv_member(self) -> str | None:
        """The copy of the validated-sentences file inside the release, if any."""
        for name in self.names:
            if name.split("/")[-1] == VALIDATED and "__MACOSX" not in name.split("/"):
                return name
        return None


def _parse(release: _Release, member: str) -> ElementTree.Element:
    try:
        root = ElementTree.fromstring(release.read(member))
    except ElementTree.ParseError as e:
        line, column = e.position
        raise CmrkitError(
            f"the XML does not parse ({str(e).split(':')[0]}); the file is damaged: "
            "re-extract it from the release",
            path=release.where(member),
            where=f"line {line} column {column + 1}",
        ) from None
    if root.tag != "Document":
        raise CmrkitError(
            f"the root element is <{root.tag}>, not <Document>: not an ECB+ file",
            path=release.where(member),
        )
    return root


def _sentences(root: ElementTree.Element) -> tuple[dict[str, tuple[int, int]], list]:
    """Each token id's (sentence, position in it), and the sentences as (number, tokens)."""
    where: dict[str, tuple[int, int]] = {}
    sentences: dict[int, list[str]] = {}
    for tok in root.iter("token"):
        number = int(tok.get("sentence", "0"))
        words = sentences.setdefault(number, [])
        where[tok.get("t_id", "")] = (number, len(words))
        words.append(tok.text or "")
    return where, sorted(sentences.items())


def _chains(
    root: ElementTree.Element, doc: str, markables: dict[str, _Markable]
) -> dict[str, tuple[str, str]]:
    """Each mention's (chain id, chain tag) from the relations."""
    chains: dict[str, tuple[str, str]] = {}
    relations = root.find("Relations")
    for rel in [] if relations is None else list(relations):
        targets = [t.get("m_id", "") for t in rel.findall("target")]
        instance = markables.get(targets[0]) if targets else None
        tag = instance.tag if instance is not None else NO_TAG
        if rel.tag == "CROSS_DOC_COREF":
            chain = rel.get("note") or f"CROSS_{rel.get('r_id')}"
        elif rel.tag == "INTRA_DOC_COREF":
            chain = f"INTRA_{rel.get('r_id')}_{doc}"
        else:
            continue
        for source in rel.findall("source"):
            chains[source.get("m_id", "")] = (chain, tag)
    return chains


def _validated(text: str, path: str) -> set[tuple[str, int]]:
    """(document, sentence) pairs of the validated-sentences CSV (``Topic,File,Sentence
    Number``, e.g. ``1,10ecbplus,1`` for sentence 1 of ``1_10ecbplus``)."""
    rows = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = next(rows, None)
    if header is None or [h.strip() for h in header[:3]] != ["Topic", "File", "Sentence Number"]:
        raise CmrkitError(
            "is not ECB+'s validated-sentences file: its header is not "
            "'Topic,File,Sentence Number'",
            path=path,
            where="line 1",
        )
    kept: set[tuple[str, int]] = set()
    for n, row in enumerate(rows, 2):
        if not row:
            continue
        try:
            kept.add((f"{row[0].strip()}_{row[1].strip()}", int(row[2])))
        except (IndexError, ValueError):
            raise CmrkitError(
                "expected Topic,File,Sentence Number (e.g. 1,10ecbplus,1)",
                path=path,
                where=f"line {n}",
            ) from None
    return kept


def _validated_source(release: _Release, given: str | None) -> tuple[str | None, bool]:
    """Where the validated sentences come from: ``--validated FILE``, else the file beside the
    input (or in its folder), else the release's own copy (``ZIP::MEMBER``); None for every
    sentence (``none``, or no file found). The flag: a file of its own (not inside the zip)."""
    if given == "none":
        return None, False
    if given is not None:
        return given, True
    base = Path(release.path)
    for candidate in (base / VALIDATED, base.parent / VALIDATED):
        if candidate.is_file():
            return str(candidate), True
    member = release.csv_member()
    return (None, False) if member is None else (release.where(member), False)


def release_sha256(path: str | os.PathLike) -> str:
    """The sha256 of the input: the zip's bytes, or for a folder the names and bytes of its
    ECB+ files and validated-sentences copy in order."""
    release = _Release(path)
    if release.zip is not None:
        from cmrkit.fileio import sha256_file

        return sha256_file(path)
    import hashlib

    h = hashlib.sha256()
    member = release.csv_member()
    for name in [m for m, _ in release.members] + ([member] if member else []):
        h.update(name.encode("utf-8") + b"\0")
        h.update(hashlib.sha256(release.read(name)).digest())
    return h.hexdigest()


def validated_file(path: str | os.PathLike, given: str | None) -> str | None:
    """The validated-sentences file of its own that :func:`read_ecbplus` reads for this input
    (for the manifest), None when it reads the release's copy or none."""
    shown, own = _validated_source(_Release(path), given)
    return shown if own else None


def _read_validated(release: _Release, given: str | None) -> tuple[str | None, set | None]:
    shown, own = _validated_source(release, given)
    if shown is None:
        return None, None
    if own:
        from cmrkit.fileio import read_text

        return shown, _validated(read_text(shown), shown)
    member = release.csv_member()
    assert member is not None
    return shown, _validated(release.read(member).decode("utf-8"), shown)


def _markables(root: ElementTree.Element) -> dict[str, _Markable]:
    found: dict[str, _Markable] = {}
    markables = root.find("Markables")
    for mk in [] if markables is None else list(markables):
        anchors = [a.get("t_id", "") for a in mk.findall("token_anchor")]
        found[mk.get("m_id", "")] = _Markable(mk.get("m_id", ""), mk.tag, anchors)
    return found


def _document_mentions(
    release: _Release, member: str, doc: str, kind: str, counts: Counter
) -> Iterator[tuple[Mention, tuple[str, int]]]:
    """The mentions of one file (every sentence), each with its (document, sentence)."""
    root = _parse(release, member)
    where, sentences = _sentences(root)
    by_number = dict(sentences)
    offsets, at = {}, 0
    for number, words in sentences:  # the document's text: its sentences joined by a space
        offsets[number] = at
        at += len(join_tokens(words)[0]) + 1
    markables = _markables(root)
    chains = _chains(root, doc, markables)
    topic_text, _, rest = doc.partition("_")
    subtopic = f"{topic_text}{'ecbplus' if rest.endswith('ecbplus') else 'ecb'}"
    split = split_of(int(topic_text))
    for mk in markables.values():
        if not mk.anchors:
            continue
        missing = [a for a in mk.anchors if a not in where]
        if missing:
            raise CmrkitError(
                f"markable m_id {mk.m_id} anchors token t_id {missing[0]}, which the file lacks",
                path=release.where(member),
            )
        chain, chain_tag = chains.get(mk.m_id, (None, NO_TAG))
        tag = mk.tag if chain_tag == NO_TAG else chain_tag
        if chain_tag not in (NO_TAG, mk.tag):
            counts["tag_from_chain"] += 1
        if (kind == "events") != is_event(tag) and kind != "all":
            continue
        places = [where[a] for a in mk.anchors]
        sentence = places[0][0]
        if any(s != sentence for s, _ in places):
            counts["cross_sentence"] += 1
        positions = sorted({p for s, p in places if s == sentence})
        if positions != list(range(positions[0], positions[-1] + 1)):
            counts["non_contiguous"] += 1
        words = by_number[sentence]
        context, starts, ends = join_tokens(words)
        start, end = starts[positions[0]], ends[positions[-1]]
        mention = Mention(
            mention_id=f"{doc}:{mk.m_id}",
            cluster=chain or f"Singleton_{tag[:3]}_{mk.m_id}_{doc}",
            doc_id=doc,
            context=context,
            start=start,
            end=end,
            text=context[start:end],
            doc_title=doc,
            context_offset=offsets[sentence],
            type=tag,
            split=split,
            source={"file": f"{topic_text}/{doc}.xml", "m_id": mk.m_id},
            cdcr=Cdcr(
                topic=topic_text,
                subtopic=subtopic,
                sentence=sentence,
                tokens=positions,
                sentences=sentences,
            ),
        )
        yield mention, (doc, sentence)


def read_ecbplus(
    path: str | os.PathLike,
    *,
    kind: str = "events",
    validated: str | None = None,
) -> EcbRead:
    """The mentions of the release (``kind``: events, entities or all), split by topic, only
    those of the validated sentences (``validated``: a CSV path, None to look beside the input
    and inside the release, ``"none"`` for every sentence)."""
    if kind not in KINDS:
        raise CmrkitError(f"--mentions {kind!r} is not one of {', '.join(KINDS)}")
    release = _Release(path)
    shown, keep = _read_validated(release, validated)
    counts: Counter = Counter()
    mentions: list[Mention] = []
    matched = 0
    documents = {doc for _, doc in release.members}
    if keep is not None and not any(d in documents for d, _ in keep):
        first = min(keep)
        raise CmrkitError(
            f"no row names a document of the release (first: topic {first[0].split('_')[0]}, "
            f"file {first[0].partition('_')[2]}); is it ECB+'s ECBplus_coreference_sentences.csv "
            "for this release?",
            path=shown,
        )
    for member, doc in release.members:
        for mention, place in _document_mentions(release, member, doc, kind, counts):
            if keep is not None and place not in keep:
                counts["outside_validated"] += 1
                continue
            matched += 1
            mentions.append(mention)
    sizes = Counter(m.cluster for m in mentions)
    for m in mentions:
        assert m.cdcr is not None
        m.cdcr.singleton = sizes[m.cluster] == 1
    notes = [
        f"ECB+ {kind}: {len(mentions):,} mentions in {len(sizes):,} chains from "
        f"{len(release.members)} documents"
        + (
            f"; {counts['outside_validated']:,} outside the validated sentences left out"
            if keep is not None
            else "; every sentence kept (no validated-sentences file)"
        )
    ]
    for key, what in (
        ("tag_from_chain", "took their chain's tag"),
        ("non_contiguous", "lie on non-contiguous tokens (kept: their tokens)"),
        ("cross_sentence", "cross a sentence boundary (kept: their first sentence's tokens)"),
    ):
        if counts[key]:
            notes.append(f"{counts[key]:,} markable(s) of the kind read {what}")
    return EcbRead(mentions, shown, notes)
