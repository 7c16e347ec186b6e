"""A report a reviewer reads top-down (issue 50, item 5): the labels' verdicts first, then each attack and each
defense in one stable order (strengths weak to strong, whatever order the store holds them in), one figure format by
default, no CAP for no defense, and a defended attack below the prior read as the defense's doing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pandas as pd
import pytest

from vflpriv.reports.results import write_report
from vflpriv.store.records import RunRecord

AXES = {"iso": ("lambda", "higher", 0.0), "label-dp": ("epsilon", "lower", float("inf"))}


def _hits(right: int, n: int = 100) -> str:
    return "1" * right + "0" * (n - right)


def _records() -> pd.DataFrame:
    """An audit-like store: gc and mc on splitnn/digits, no defense, ISO and label DP, two seeds; the defended
    strengths stored out of their axis' order. gc leaks without a defense and is pushed below the prior by ISO 25;
    mc fails without a defense (below the prior)."""
    prior = 60
    attack = {("gc", "none", 0.0): 90, ("gc", "iso", 5.0): 70, ("gc", "iso", 25.0): 20, ("gc", "iso", 1.0): 88,
              ("gc", "label-dp", 2.0): 50, ("gc", "label-dp", 1.0): 30, ("gc", "label-dp", 8.0): 85,
              ("mc", "none", 0.0): 30, ("mc", "iso", 5.0): 30, ("mc", "iso", 25.0): 30, ("mc", "iso", 1.0): 30,
              ("mc", "label-dp", 2.0): 30, ("mc", "label-dp", 1.0): 30, ("mc", "label-dp", 8.0): 30}
    rows = []
    for (name, defense, strength), right in attack.items():
        axis, stronger, identity = AXES.get(defense, ("lambda", "higher", 0.0))
        for seed in (0, 1):
            config = {"seed": seed, "defenses": [] if defense == "none" else [{"name": defense, "phase": "finetune", "sweep": True}]}
            rows.append(RunRecord(
                key=f"{name}{defense}{strength}{seed}", training_key=f"{defense}{strength}{seed}", method="splitnn",
                dataset="digits", attack=name, defense=defense, phase="finetune", strength=strength, seed=seed,
                strength_axis=axis, strength_stronger=stronger, strength_identity=identity, num_classes=10,
                utility=0.9 - strength / 100, utility_metric="accuracy", attack_accuracy=(right + seed) / 100,
                prior_accuracy=prior / 100, attack_hits=_hits(right + seed), prior_hits=_hits(prior),
                config=json.dumps(config)).to_dict())
    return pd.DataFrame(rows).assign(variant="")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = write_report(_records(), out, store=out / "results.sqlite")
    return out, path.read_text()


def _positions(text: str, needles: list[str]) -> list[int]:
    return [text.index(n) for n in needles]


def test_the_page_reads_verdicts_then_attacks_then_defenses_in_a_stable_order(page):
    _, html = page
    order = _positions(html, ["<section id='labels'>", "<section id='labels-verdicts'>", "<section id='labels-attacks'>",
                              "<section id='labels-attack-gc'>", "<section id='labels-attack-mc'>",
                              "<section id='labels-attack-worst-case'>", "<section id='labels-defenses'>",
                              "<section id='labels-defense-iso'>", "<section id='labels-defense-label-dp'>",
                              "<section id='configuration'>"])
    assert order == sorted(order)
    nav = html[html.index("<nav>"):html.index("</nav>")]
    assert all(f"href='#{i}'" in nav for i in ("labels", "labels-attack-gc", "labels-defense-iso", "configuration"))


def test_each_attack_table_lists_no_defense_first_then_each_defense_weak_to_strong(page):
    _, html = page
    gc = html[html.index("<section id='labels-attack-gc'>"):html.index("<section id='labels-attack-mc'>")]
    cells = re.findall(r"<td>(no defense|iso|label-dp)</td><td>([^<]*)</td>", gc)
    assert cells == [("no defense", ""), ("iso", "λ=1"), ("iso", "λ=5"), ("iso", "λ=25"), ("label-dp", "epsilon=8"),
                     ("label-dp", "epsilon=2"), ("label-dp", "epsilon=1")]


def test_below_the_prior_reads_as_the_defense_s_doing_only_where_the_attack_reached_it_undefended(page):
    _, html = page
    gc = html[html.index("<section id='labels-attack-gc'>"):html.index("<section id='labels-attack-mc'>")]
    row = gc[gc.index("<td>λ=25</td>"):].split("</tr>")[0]
    assert "no: the defense pushed the attack below the prior" in row and "attack failed" not in row
    mc = html[html.index("<section id='labels-attack-mc'>"):html.index("<section id='labels-attack-worst-case'>")]
    undefended = mc[mc.index("<td>no defense</td>"):].split("</tr>")[0]
    assert "attack failed: below the prior without a defense" in undefended
    assert "pushed" not in mc  # mc failed without a defense too: ISO is not why it is below the prior
    verdicts = html[html.index("<section id='labels-verdicts'>"):html.index("<section id='labels-attacks'>")]
    assert "mc: leaks beyond the prior: <strong>attack failed</strong>" in verdicts


def test_no_cap_for_no_defense_and_one_figure_format_by_default(page, tmp_path):
    out, html = page
    assert "labels-defense-none" not in html and "defense none" not in html
    assert "none" not in set(pd.read_csv(out / "cap_tables.csv")["defense"])
    figures = sorted(p.name for p in out.iterdir() if p.suffix in (".png", ".svg", ".pdf"))
    assert figures == ["report_tradeoff_gc_finetune.png", "report_tradeoff_mc_finetune.png",
                       "report_tradeoff_worst-case_finetune.png"]
    assert html.count("data:image/png;base64,") == 3 and len(html.encode()) < 3_000_000
    write_report(_records(), tmp_path, store=tmp_path / "results.sqlite", formats=("svg",))
    assert {p.suffix for p in tmp_path.iterdir() if p.name.startswith("report_tradeoff_")} == {".png", ".svg"}


def test_an_unknown_figure_format_is_refused(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from vflpriv.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "missing"), "--formats", "png,bmp"])
    assert result.exit_code == 2
    assert result.output == "error: --formats 'png,bmp': unknown bmp; valid formats: png, svg, pdf\n"
    assert not any(tmp_path.iterdir())


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium: apt-get install -y chromium")
def test_a_browser_opens_the_page_and_every_link_of_its_contents_lands_on_a_section(page, tmp_path):
    out, _ = page
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120).stdout
    links = re.findall(r'href="#([^"]+)"', dom[dom.index("<nav>"):dom.index("</nav>")])
    assert len(links) >= 10
    assert all(f'id="{link}"' in dom for link in links)
    assert dom.count("<img") == 3


def test_a_report_into_a_sweep_s_folder_replaces_none_of_its_figures(tmp_path):
    """Review-hunt3 P14: ``report STORE --out`` the sweep's folder overwrote the sweep's ``tradeoff.png`` (one attack
    and phase: the report's one figure had the sweep's name)."""
    records = _records()
    (tmp_path / "tradeoff.png").write_bytes(b"the sweep's figure")
    write_report(records[records["attack"] == "gc"], tmp_path, store=tmp_path / "results.sqlite")
    assert (tmp_path / "tradeoff.png").read_bytes() == b"the sweep's figure"
    assert (tmp_path / "report_tradeoff.png").is_file()
