"""The code examples of README.md and docs/**/*.md, and how each is checked the cheap way (test_docs_examples.py).

A fenced block is checked by its language: shell (no language, ``bash``, ``sh``, ``console``) line by line, ``yaml``
by the config loader and planner, ``python`` run, ``toml`` parsed; ``text`` and others are output, not checked. A
shell line's programs: ``vflpriv`` (``list``, ``describe``, ``datasets``, ``--version`` really; ``evaluate``,
``audit``, ``sweep``, ``tune``, ``reproduce`` with ``--dry-run``; ``table`` and ``report`` on a tiny store put where
the command reads it), ``pip install`` (its constraints file, its local projects and their extras), ``python3 -m
venv`` and the test command (run by CI). An inline ``vflpriv ...`` span of the prose is checked for its command and
options. An HTML comment on the line before a block changes how it is checked (invisible on the rendered page):

- ``<!-- docs-test: skip: REASON -->``: not checked, for REASON;
- ``<!-- docs-test: parse-only: REASON -->``: its ``vflpriv`` commands checked for their command and options, not run
  (a cluster, a dataset of the user's), other programs not checked;
- ``<!-- docs-test: file NAME -->``: the block is written to NAME in the working folder, for the commands after it;
- ``<!-- docs-test: check: COMMAND -->``: the ``vflpriv`` command that checks a YAML block, ``{}`` its file.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from vflpriv.cli import app

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"", "bash", "sh", "shell", "console"}
#: vflpriv's commands that train: checked with --dry-run.
TRAINING = {"evaluate", "audit", "sweep", "tune", "reproduce"}
#: vflpriv's commands that only show what is installed: run as written.
SHOWING = {"list", "describe", "datasets"}
#: vflpriv's commands that read a store: run on a tiny store put where they read it.
READING = {"table", "report"}
#: Programs after a pipe that only filter output.
FILTERS = {"head", "tail", "grep", "less"}
MARKER = re.compile(r"<!--\s*docs-test:\s*(skip|parse-only|file|check)\s*:?\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)```\s*([\w-]*)\s*$")
INLINE = re.compile(r"`(vflpriv [^`]+)`")


class Broken(Exception):
    """A documented example that does not work as written."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    text: str
    marker: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name
        return f"{shown}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a markdown file, in order, each with the docs-test marker on the line before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, language = len(fence.group(1)), fence.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise Broken(f"{path.name}:{i + 1}: a fenced block is never closed")
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.search(before)
        if "docs-test" in before and not marker:
            raise Broken(f"{path.name}:{i}: unknown docs-test marker {before.strip()!r}; valid: skip: "
                         "REASON, parse-only: REASON, file NAME, check: COMMAND")
        text = "\n".join(line[indent:] for line in lines[i + 1:end])
        found.append(Block(path, i + 1, language, text, marker.groups() if marker else None))
        i = end + 1
    return found


def inline_commands(path: Path) -> list[str]:
    """The ``vflpriv ...`` spans of the prose (outside fenced blocks)."""
    text = path.read_text(encoding="utf-8")
    prose = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)
    return INLINE.findall(prose)


# ------------------------------------------------------------------------------------------------ shell lines


def commands(text: str) -> list[list[str]]:
    """The simple commands of a shell block: continuation lines joined, comments dropped, split at ``&&``, ``;``,
    ``&`` and ``|`` (a filter after a pipe is dropped)."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split, lexer.commenters = True, "#"
        current: list[str] = []
        piped = False
        for token in [*lexer, ";"]:
            if token in ("&&", ";", "&", "|", "||"):
                if current and not (piped and Path(current[0]).name in FILTERS):
                    found.append(current)
                current, piped = [], token == "|"
            else:
                current.append(token)
    return found


def program(argv: list[str]) -> tuple[str, list[str]]:
    """(program, its arguments): ``.venv/bin/vflpriv`` and ``python -m vflpriv`` are vflpriv, ``python -m pip`` pip."""
    name = Path(argv[0]).name
    if re.fullmatch(r"python[\d.]*", name) and len(argv) > 2 and argv[1] == "-m":
        return argv[2], argv[3:]
    return {"pip3": "pip"}.get(name, name), argv[1:]


def check_shell(block: Block, workdir: Path, store: Path, *, parse_only: bool = False) -> None:
    for argv in commands(block.text):
        name, args = program(argv)
        if name == "vflpriv":
            (check_options if parse_only else run_vflpriv)(args, workdir=workdir, store=store)
        elif name == "pip":
            check_pip(args)
        elif name == "venv" or (name == "pytest" and Path(argv[0]).name.startswith("python")):
            continue  # the environment and the test command: CI runs them verbatim (.ci/run)
        elif not parse_only:
            raise Broken(f"{shlex.join(argv)}: '{name}' is not a program this test checks; mark the block "
                         "<!-- docs-test: parse-only: REASON --> or <!-- docs-test: skip: REASON -->")


def check_options(args: list[str], **_: object) -> None:
    """The command exists and takes every ``--option`` given (placeholders and ``[...]`` allowed around them)."""
    root = typer.main.get_command(app)
    words = [w.strip("[]") for w in args if w.strip("[]")]
    if not words or words[0].startswith("-"):
        names = {o for p in root.params for o in (*p.opts, *p.secondary_opts)}
        unknown = [w for w in words if w.startswith("--") and w.split("=")[0] not in names]
        if unknown:
            raise Broken(f"vflpriv {' '.join(args)}: vflpriv takes no {', '.join(unknown)}")
        return
    command = root.commands.get(words[0])
    if command is None:
        raise Broken(f"vflpriv {' '.join(args)}: no command '{words[0]}'; vflpriv's: "
                     f"{', '.join(sorted(root.commands))}")
    names = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    unknown = [w.split("=")[0] for w in words[1:] if w.startswith("--") and w.split("=")[0] not in names]
    if unknown:
        raise Broken(f"vflpriv {' '.join(args)}: '{words[0]}' takes no {', '.join(unknown)}; its options: "
                     f"{', '.join(sorted(names))}")


def run_vflpriv(args: list[str], *, workdir: Path, store: Path) -> None:
    """Run it the cheap way in ``workdir`` (see the module's docstring); a refusal for a dataset this machine lacks
    skips, naming it."""
    check_options(args)
    command = args[0] if args else ""
    if "--help" in args or "--list" in args or command in SHOWING or args == ["--version"]:
        pass  # only shows what is there
    elif command in TRAINING:
        args = [*args, "--dry-run"]
    elif command in READING:
        _put_store(args, workdir=workdir, store=store)
    else:
        raise Broken(f"vflpriv {' '.join(args)}: this test does not know how to run '{command}' cheaply")
    result = CliRunner().invoke(app, args)
    if result.exit_code == 0:
        return
    if result.exit_code == 2:
        lacking = [name for name in _absent_datasets() if re.search(rf"\b{re.escape(name)}\b", result.output)]
        if lacking:
            pytest.skip(f"vflpriv {' '.join(args)} needs dataset {lacking[0]}, not on this machine")
        if "pip install 'vflpriv[" in result.output:  # vflpriv's own line for an extra this environment lacks
            pytest.skip(f"vflpriv {' '.join(args)}: {result.output.strip()}")
    raise Broken(f"vflpriv {' '.join(args)} exits {result.exit_code}:\n{result.output}"
                 + (f"\n{result.exception!r}" if result.exception and result.exit_code != 2 else ""))


def _put_store(args: list[str], *, workdir: Path, store: Path) -> None:
    """A tiny store where ``table``/``report`` reads (a folder's results.sqlite, or the .sqlite file named)."""
    named = next((a for a in args[1:] if not a.startswith("-")), None)
    if named is None or named.isupper():
        return
    target = workdir / named
    target = target if target.suffix == ".sqlite" else target / "results.sqlite"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store, target)


def _absent_datasets() -> list[str]:
    from vflpriv.data.catalog import DATASET_INFO, status

    return [name for name in DATASET_INFO if not status(name)[0]]


def check_pip(args: list[str]) -> None:
    """``pip install``: its constraints file exists, each ``-e`` target is a project of the repository and every
    extra it names is one of that project's."""
    if not args or args[0] != "install":
        raise Broken(f"pip {' '.join(args)}: only 'pip install' is documented")
    words = iter(args[1:])
    for word in words:
        if word in ("-c", "--constraint"):
            constraints = next(words, "")
            if not (ROOT / constraints).is_file():
                raise Broken(f"pip {' '.join(args)}: no constraints file {constraints} in the repository")
        elif word in ("-e", "--editable"):
            _check_project(next(words, ""), args)
        elif not word.startswith("-"):
            raise Broken(f"pip {' '.join(args)}: {word} is not a project of this repository (give it with -e)")


def _check_project(target: str, args: list[str]) -> None:
    match = re.fullmatch(r"([^\[]+)(?:\[([^\]]*)\])?", target)
    if not match or not (ROOT / match.group(1) / "pyproject.toml").is_file():
        raise Broken(f"pip {' '.join(args)}: {target} is not a project of this repository (no pyproject.toml)")
    project = tomllib.loads((ROOT / match.group(1) / "pyproject.toml").read_text())["project"]
    extras = set(project.get("optional-dependencies", {}))
    unknown = [e.strip() for e in (match.group(2) or "").split(",") if e.strip() and e.strip() not in extras]
    if unknown:
        raise Broken(f"pip {' '.join(args)}: {project['name']} has no extra {', '.join(unknown)}; its extras: "
                     f"{', '.join(sorted(extras))}")


# ------------------------------------------------------------------------------------------------ other languages


PLURAL_KEYS = ("methods:", "datasets:", "attacks:", "axes:")


def check_yaml(block: Block, workdir: Path, store: Path) -> None:
    """Load and plan it as the command it belongs to would: ``check:``'s, else a grid (a plural key) by
    ``sweep --dry-run``, an experiment by ``evaluate --config --dry-run``."""
    name = block.marker[1] if block.marker and block.marker[0] == "file" else f"block-{block.line}.yaml"
    path = workdir / name
    path.write_text(block.text + "\n", encoding="utf-8")
    if block.marker and block.marker[0] == "check":
        argv = shlex.split(block.marker[1].replace("{}", shlex.quote(str(path))))
    elif any(line.startswith(PLURAL_KEYS) for line in block.text.splitlines()):
        argv = ["vflpriv", "sweep", str(path)]
    else:
        argv = ["vflpriv", "evaluate", "--config", str(path)]
    if program(argv)[0] != "vflpriv":
        raise Broken(f"check: {block.marker[1]} is not a vflpriv command")
    run_vflpriv(program(argv)[1], workdir=workdir, store=store)


def check_python(block: Block, namespace: dict) -> None:
    """Run it, in the namespace of the page's earlier blocks (a page's examples build on each other)."""
    try:
        exec(compile(block.text, block.name, "exec"), namespace)  # noqa: S102 - our own documentation
    except Exception as exc:  # noqa: BLE001 - any failure of a documented example is the finding
        raise Broken(f"{block.name}: the python example raises {exc!r}") from exc


def check_names(block: Block) -> None:
    """Parse it, and check that every ``vflpriv.NAME`` it uses is one of the package's."""
    import vflpriv

    try:
        compile(block.text, block.name, "exec")
    except SyntaxError as exc:
        raise Broken(f"{block.name}: the python example does not parse ({exc})") from None
    missing = sorted({n for n in re.findall(r"\bvflpriv\.(\w+)", block.text) if not hasattr(vflpriv, n)})
    if missing:
        raise Broken(f"{block.name}: vflpriv has no {', '.join(missing)}")


def check_toml(block: Block) -> None:
    try:
        tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as exc:
        raise Broken(f"{block.name}: the TOML example does not parse ({exc})") from None


def check_block(block: Block, *, workdir: Path, store: Path, namespace: dict) -> None:
    """Check one block as its language and marker say; ``workdir`` is the page's working folder (files of earlier
    blocks are there)."""
    kind, argument = block.marker or ("", "")
    if kind in ("skip", "parse-only") and not argument:
        raise Broken(f"{block.name}: docs-test {kind} needs its reason")
    if kind == "skip":
        return
    if kind == "file" and block.language != "yaml":
        (workdir / argument).write_text(block.text + "\n", encoding="utf-8")
    if block.language in SHELL:
        check_shell(block, workdir, store, parse_only=kind == "parse-only")
    elif block.language == "yaml" and kind != "parse-only":
        check_yaml(block, workdir, store)
    elif block.language == "python" and kind != "parse-only":
        check_python(block, namespace)
    elif block.language == "python":
        check_names(block)
    elif block.language == "toml":
        check_toml(block)
