"""Every code example of README.md and the documentation site works as written, checked the cheap way (training
commands with --dry-run, table and report on a tiny store, YAML through the loader and planner, python run, pip
lines against the extras; docs_examples.py says how), and a broken example fails this test."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_examples import Block, Broken, blocks, check_block, check_options, inline_commands, pages
from typer.testing import CliRunner

from vflpriv.cli import app

BLOCKS = [b for page in pages() for b in blocks(page)]


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    """A real store of 4 runs (a swept defense at 2 strengths x 2 seeds) for the documented table and report."""
    out = tmp_path_factory.mktemp("docs-store")
    result = CliRunner().invoke(app, ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "iso",
                                      "--strengths", "0,5", "--seeds", "0,1", "--set", "partition.labeled=60",
                                      "--set", "partition.aux=20", "--set", "finetune.epochs=1", "--set",
                                      "attack.options.epochs=5", "--set", "attack.prior_epochs=5", "--jobs", "1",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "results.sqlite"


def _check(block: Block, page: list[Block], *, workdir: Path, store: Path) -> None:
    """Check ``block`` after what the page's earlier blocks leave for it: their files, their python definitions."""
    namespace: dict = {"__name__": "docs_example"}
    for earlier in page[:page.index(block)]:
        kind = (earlier.marker or ("", ""))[0]
        if kind == "file":
            (workdir / earlier.marker[1]).write_text(earlier.text + "\n", encoding="utf-8")
        elif earlier.language == "python" and kind not in ("skip", "parse-only"):
            check_block(earlier, workdir=workdir, store=store, namespace=namespace)
    check_block(block, workdir=workdir, store=store, namespace=namespace)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_a_documented_example_works_as_written(block, request, tmp_path, monkeypatch):
    store = request.getfixturevalue("tiny_store") if "vflpriv table" in block.text or "vflpriv report" in block.text \
        else tmp_path / "no-store.sqlite"
    monkeypatch.chdir(tmp_path)
    try:
        _check(block, blocks(block.path), workdir=tmp_path, store=store)
    except Broken as exc:
        pytest.fail(f"{block.name}: {exc}", pytrace=False)


@pytest.mark.parametrize("page", pages(), ids=[p.name for p in pages()])
def test_every_inline_command_names_a_command_and_options_vflpriv_has(page):
    broken = []
    for text in inline_commands(page):
        try:
            check_options(text.split()[1:])
        except Broken as exc:
            broken.append(str(exc))
    assert not broken, "\n".join(broken)


#: Broken examples, each on a page of its own, and what the check says of it.
BROKEN = {
    "unknown option": ("```\nvflpriv evaluate --methd splitnn\n```\n", "'evaluate' takes no --methd"),
    "unknown command": ("```\nvflpriv evalute --method splitnn\n```\n", "no command 'evalute'"),
    "refused setting": ("```\nvflpriv evaluate --method nope\n```\n", "exits 2"),
    "fails in planning": ("```\nvflpriv evaluate --set partition.labeled=5000\n```\n", "exceeds the"),
    "a table with no store": ("```\nvflpriv table\n```\n", "exits 2"),
    "unknown extra": ("```\npip install -c constraints.txt -e '.[dev,gpu]'\n```\n", "has no extra gpu"),
    "no such constraints": ("```\npip install -c constraint.txt -e .\n```\n", "no constraints file"),
    "not a project": ("```\npip install -e examples/nope\n```\n", "not a project of this repository"),
    "a program not checked": ("```\ndask scheduler &\n```\n", "'dask' is not a program this test checks"),
    "bad yaml": ("```yaml\nmethods: [splitnn]\nstregths: [1, 5]\n```\n", "did you mean strengths?"),
    "yaml the planner refuses": ("```yaml\npartition: {labeled: 5000}\n```\n", "exceeds the"),
    "python that raises": ("```python\nimport vflpriv\nvflpriv.no_such_function()\n```\n", "AttributeError"),
    "python naming what vflpriv lacks": ("<!-- docs-test: parse-only: trains -->\n```python\nimport vflpriv\n"
                                         "vflpriv.evaluat({})\n```\n", "vflpriv has no evaluat"),
    "bad toml": ("```toml\n[project\n```\n", "does not parse"),
    "skip without reason": ("<!-- docs-test: skip -->\n```\nvflpriv evaluate\n```\n", "needs its reason"),
    "unknown marker": ("<!-- docs-test: ignore -->\n```\nvflpriv evaluate\n```\n", "unknown docs-test marker"),
    "an unclosed fence": ("```\nvflpriv list methods\n", "never closed"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_example_fails_the_check(case, tmp_path, monkeypatch):
    text, needle = BROKEN[case]
    page = tmp_path / "page.md"
    page.write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Broken, match=None) as caught:
        for block in blocks(page):
            check_block(block, workdir=tmp_path, store=tmp_path / "no-store.sqlite", namespace={})
    assert needle in str(caught.value)


def test_a_broken_inline_command_is_named():
    with pytest.raises(Broken, match="'audit' takes no --check"):
        check_options(["audit", "--method", "NAME", "--check"])
    check_options(["table", "STORE", "--out", "DIR", "[--attack", "A", "--defense", "D", "--phase", "P]"])
