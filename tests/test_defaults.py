"""One owner per default (issue 32 item 4): each default is written once, in the module that
owns it, and the command line and the library ask that module for it."""

from __future__ import annotations

import ast
from pathlib import Path

import typer

from cmrkit.cli import app
from cmrkit.retrieval.dense.options import DEFAULT_MODEL
from cmrkit.retrieval.reader.options import RERANK_DEFAULTS, RerankOptions
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

PACKAGE = Path(__file__).resolve().parents[1] / "cmrkit"


def _constants(value: str) -> list[str]:
    """Where the string ``value`` stands whole as a literal in cmrkit's code (docstrings and
    longer texts, such as help that names it, do not count)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == value:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def commands():
    """(command path, click command) of every command of the app."""
    root = typer.main.get_command(app)

    def walk(group, ctx, path):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            sub = cmd.context_class(cmd, info_name=name, parent=ctx)
            if hasattr(cmd, "list_commands"):
                yield from walk(cmd, sub, (*path, name))
            else:
                yield " ".join((*path, name)), cmd

    yield from walk(root, root.context_class(root, info_name="cmrkit"), ())


def _parameters():
    """(command path, click parameter) of every option and argument of every command."""
    for path, cmd in commands():
        for param in cmd.params:
            yield path, param


def test_the_spacy_model_is_named_once_and_every_default_asks_it():
    assert _constants(DEFAULT_SPACY_MODEL) == ["spacy_model.py:5"]
    defaults = {c: p.default for c, p in _parameters() if p.name == "spacy_model"}
    assert {"build-collection", "index", "run bm25", "train reader"} <= set(defaults)
    assert set(defaults.values()) == {DEFAULT_SPACY_MODEL}, defaults


def test_the_base_encoder_is_named_once_and_every_default_asks_it():
    assert _constants(DEFAULT_MODEL) == ["retrieval/dense/options.py:11"]
    encoders = {"encode", "run dense", "train dense", "train reader"}
    defaults = {c: p.default for c, p in _parameters() if p.name == "model" and c in encoders}
    assert defaults == dict.fromkeys(encoders, DEFAULT_MODEL), defaults


def test_run_rerank_declares_its_options_from_the_library_defaults():
    """Every option of `run rerank` that RerankOptions holds takes its default from
    RERANK_DEFAULTS (not a number written again in commands/reader.py)."""
    import dataclasses

    from cmrkit.commands import reader

    # engine: --engine and its Ray options, shared with encode and run dense (commands/runs.py)
    fields = {f.name for f in dataclasses.fields(RerankOptions)} - {"engine"}
    tree = ast.parse(Path(reader.__file__).read_text(encoding="utf-8"))
    command = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "rerank_command"
    )
    args = command.args.args[-len(command.args.defaults) :]
    asked = set()
    for arg, default in zip(args, command.args.defaults, strict=True):
        if arg.arg not in fields or arg.arg in ("device", "precision"):  # shared with dense
            continue
        assert isinstance(default, ast.Call) and default.args, arg.arg
        first = default.args[0]
        assert ast.unparse(first) == f"RERANK.{arg.arg}", (arg.arg, ast.unparse(first))
        asked.add(arg.arg)
    assert asked == fields - {"device", "precision"}
    params = {p.name: p.default for c, p in _parameters() if c == "run rerank"}
    for name in fields:
        default = getattr(params[name], "value", params[name])
        assert default == getattr(RERANK_DEFAULTS, name), name


def test_dedupe_is_declared_once_with_one_help():
    assert _constants("--dedupe") == ["commands/output.py:27"]
    helps = {c: p.help for c, p in _parameters() if p.name == "dedupe"}
    assert {"eval", "compare", "agree", "repro"} <= set(helps)
    assert len(set(helps.values())) == 1, helps


def _default_sources(module, function: str) -> dict[str, str]:
    """Each parameter default of ``function`` in ``module``'s source, as written."""
    import inspect

    tree = ast.parse(inspect.getsource(module))
    node = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == function
    )
    if isinstance(node, ast.ClassDef):  # a dataclass: its fields
        return {
            s.target.id: ast.unparse(s.value)
            for s in node.body
            if isinstance(s, ast.AnnAssign) and s.value is not None
        }
    args = [*node.args.args, *node.args.kwonlyargs]
    defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
    defaults += node.args.kw_defaults
    return {a.arg: ast.unparse(d) for a, d in zip(args, defaults, strict=True) if d is not None}


def test_compare_asks_compare_options_for_its_defaults():
    """--permutations, --bootstrap, --ci, --alpha and --seed of `compare`, cmrkit.compare and
    evaluation.significance.compare take CompareOptions' (issue 41: written three times)."""
    import cmrkit.api
    import cmrkit.evaluation.significance as significance
    from cmrkit.commands import evaluate
    from cmrkit.comparison import COMPARE

    names = {"permutations": "permutations", "bootstrap": "bootstrap", "ci": "ci"}
    names.update(alpha="alpha", seed="seed")
    params = {p.name: p.default for c, p in _parameters() if c == "compare"}
    for field in names:
        assert params[field] == getattr(COMPARE, field), field
    command = _default_sources(evaluate, "compare_command")
    for field in names:
        assert f"COMPARE.{field}" in command[field], (field, command[field])
    for module, function in ((cmrkit.api, "compare"), (significance, "compare")):
        written = _default_sources(module, function)
        for field in names:
            assert written[field] == f"COMPARE.{field}", (function, field, written[field])
    fields = _default_sources(significance, "Comparison")
    assert {fields[k] for k in ("ci", "bootstrap", "seed")} == {
        "COMPARE.ci",
        "COMPARE.bootstrap",
        "COMPARE.seed",
    }


def test_a_ranking_agreement_asks_agreement_options_and_rbo_its_p():
    """agree and judgments check declare --bootstrap, --ci, --seed and --rbo-p once
    (commands/options.py) from AgreementOptions, which the library's agreement takes too;
    RBO's extrapolated p is the same number."""
    import cmrkit.evaluation.agreement as agreement
    from cmrkit.comparison import AGREEMENT
    from cmrkit.evaluation.rbo import EXTRAPOLATED_P

    assert AGREEMENT.rbo_p == EXTRAPOLATED_P == agreement.RBO_P
    # repro's --rbo-p is repro_eval's normalised RBO, 0.95: its own
    assert [c.split(":")[0] for c in _constants("--rbo-p")] == [
        "commands/options.py",
        "commands/repro.py",
    ]
    for command in ("agree", "judgments check"):
        params = {p.name: p.default for c, p in _parameters() if c == command}
        got = (params["bootstrap"], params["ci"], params["seed"], params["rbo_p"])
        assert got == (AGREEMENT.bootstrap, AGREEMENT.ci, AGREEMENT.seed, AGREEMENT.rbo_p)
    assert _default_sources(agreement, "ranking_agreement")["p"] == "RBO_P"
    for function in ("agreement_intervals", "qrels_agreement"):
        written = _default_sources(agreement, function)
        assert (written["samples"], written["ci"], written["seed"], written["p"]) == (
            "AGREEMENT.bootstrap",
            "AGREEMENT.ci",
            "AGREEMENT.seed",
            "RBO_P",
        )


def test_simulated_assessors_take_simulation_options_everywhere():
    """--assessors 3 and --noise 0.1 were written in five files (issue 41): now
    SimulationOptions' values, asked by the three commands and the library."""
    import cmrkit.judgments.simulated as simulated
    import cmrkit.pooling.plan as plan
    import cmrkit.pooling.rounds as rounds
    from cmrkit.judgments.simulated import SIMULATION

    for command in ("pool create", "pool plan", "judgments simulate"):
        params = {p.name: p.default for c, p in _parameters() if c == command}
        assert (params["assessors"], params["noise"]) == (SIMULATION.assessors, SIMULATION.noise)
    for module, function in (
        (simulated, "SimulatedAssessors"),
        (simulated, "simulate"),
        (rounds, "pool_runs"),
        (plan, "PlanOptions"),
    ):
        written = _default_sources(module, function)
        assert (written["assessors"], written["noise"]) == (
            "SIMULATION.assessors",
            "SIMULATION.noise",
        ), function
    for name in ("pooling", "judgments"):
        module = __import__(f"cmrkit.commands.{name}", fromlist=["_"])
        text = Path(module.__file__).read_text(encoding="utf-8")
        assert "assessors: int = assessors_option(" in text and "typer.Option(3" not in text


def test_confident_is_declared_once_with_the_librarys_default():
    from cmrkit.commands import options
    from cmrkit.judgments.auto import hybrid
    from cmrkit.judgments.auto.options import CONFIDENT

    assert [c.split(":")[0] for c in _constants("--confident")] == ["commands/options.py"]
    helps = {c: p.help for c, p in _parameters() if p.name == "confident"}
    assert set(helps) == {"pool create", "assess serve"} and len(set(helps.values())) == 1
    assert f"[default: {CONFIDENT}]" in next(iter(helps.values()))
    assert _default_sources(hybrid, "__init__")["confident"] == "CONFIDENT"
    assert "CONFIDENT if confident is None" in ast.unparse(
        ast.parse(Path(options.__file__).read_text(encoding="utf-8"))
    )


def test_shared_flags_are_declared_once_in_commands_options():
    """The flags several command modules share are commands/options.py's: no command module
    imports another's options (issue 41: judge.py took --device from dense.py, --force from
    pooling.py; judge_check.py took its own from agree.py and evaluate.py)."""
    from cmrkit.commands import options

    commands = PACKAGE / "commands"
    for path in sorted(commands.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level: the option declarations a signature uses
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "cmrkit.commands."
            ):
                imported = {a.name for a in node.names}
                upper = {n for n in imported if n.isupper() and not n.endswith("_ARG")}
                assert (
                    node.module
                    in (
                        "cmrkit.commands.options",
                        "cmrkit.commands.output",
                        "cmrkit.commands.runs",
                        "cmrkit.commands.choices",
                        "cmrkit.commands.group",
                        "cmrkit.commands.judgments",
                        "cmrkit.commands.dense",  # MARKERS: the reader's markers are dense's
                    )
                    or not upper
                ), (path.name, node.module, upper)
    for name in ("DEVICE", "PRECISION", "FORCE_OUTPUTS", "MEASURE", "BOOTSTRAP", "RBO_P", "CI"):
        assert hasattr(options, name)
    devices = {c: p.help for c, p in _parameters() if p.name == "device" and c != "cluster"}
    devices.pop("train coref", None)  # coreference's own (commands/coref*.py)
    assert len(set(devices.values())) == 1, devices
