"""One self-contained HTML report from records, read top-down: a section per secret (the labels first: verdicts,
then each attack, then each defense), each a :class:`Section` with its tables and figures (PNG embedded as data
URIs), a navigation of them, the settings shared by every run and those that vary, the versions, failed runs. No
script, font or style is fetched. A secret's section comes from its own module (``reports.secret_labels``)."""

from __future__ import annotations

import base64
import functools
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from vflpriv.common.console import plural
from vflpriv.reports.paper_tables import natural
from vflpriv.tradeoff.variants import OWN_AXES, flatten, unset

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ccc; padding: 0.25em 0.7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.best { font-weight: bold; }
p.note { font-size: 0.85em; color: #555; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
code { background: #f4f4f4; padding: 0 0.2em; }
nav ul { font-size: 0.9em; } nav li { margin: 0.1em 0; }
li.verdict { margin: 0.2em 0; }
"""


def _settings(results: pd.DataFrame) -> tuple[list[tuple[str, str]], dict[str, dict[str, list[str]]]]:
    """(settings every run shares, and for each setting that differs: value -> the cells holding it); a setting the
    planner resolves with what it ran as (``auto (own)``, ``spelling.ran_as``)."""
    from vflpriv.tradeoff.spelling import ran_as  # the planner's registries: only where a report is written

    rows = [(_ran(flatten(_readable(json.loads(c))), ran_as), f"{m} / {d} / {a}") for c, m, d, a in
            zip(results["config"], results["method"], results["dataset"], results["attack"]) if isinstance(c, str) and c]
    if not rows:
        return [], {}
    flat = [f for f, _ in rows]
    keys = sorted(set().union(*flat) - OWN_AXES)
    shared = [(k, str(unset(flat[0].get(k)))) for k in keys if len({repr(f.get(k)) for f in flat}) == 1]
    varying: dict[str, dict[str, list[str]]] = {}
    for k in keys:
        if len({repr(f.get(k)) for f in flat}) > 1:
            values: dict[str, list[str]] = {}
            for f, cell in rows:
                where = values.setdefault("unset" if k not in f else _shown(k, f[k], f.get("dataset.name")), [])
                if cell not in where:
                    where.append(cell)
            varying[k] = {v: sorted(cells, key=natural) for v, cells in sorted(values.items(), key=lambda i: natural(i[0]))}
    return shared, varying


def _ran(flat: dict, ran_as) -> dict:
    """``flat`` with each value that ran as another (``ran_as``) shown with it: ``auto (own)``."""
    return {k: f"{v}{ran}" if (ran := ran_as(flat, k)) else v for k, v in flat.items()}


def _shown(key: str, value: object, dataset: object) -> str:
    """A setting's value, marked where nobody chose it: its dataset's own default (the loader's) or vflpriv's."""
    from vflpriv.config.schema import dataset_defaults

    section, _, name = key.partition(".")
    own = dataset_defaults(dataset, section) if isinstance(dataset, str) and section in ("partition", "model") else {}
    if name in own:
        return f"{unset(value)} (the default of {dataset})" if own[name] == value else str(unset(value))
    defaults = _section_defaults(section)
    return f"{unset(value)} (the default)" if name in defaults and defaults[name] == value else str(unset(value))


@functools.cache
def _section_defaults(section: str) -> dict:
    """vflpriv's defaults of one section of a run's configuration (no dataset's own defaults applied)."""
    from vflpriv.config.schema import RunConfig

    field = RunConfig.model_fields.get(section)
    if field is None or field.default_factory is None:
        return {}
    made = field.default_factory()
    return made.model_dump() if hasattr(made, "model_dump") else {}


def _readable(config: dict) -> dict:
    """The run's defenses as one setting ("none", or each defense's name, phase, and fixed strength or "swept"),
    so runs with and without a defense differ in one row, not in one per field of the defense."""
    described = []
    for d in config.get("defenses", []):
        extra = [d["phase"], "swept" if d.get("sweep") else f"strength {d.get('strength')}"]
        extra += [f"{k} {json.dumps(d[k])}" for k in ("party", "kinds") if d.get(k) is not None]
        extra += [f"options {json.dumps(d['options'], sort_keys=True)}"] if d.get("options") else []
        described.append(f"{d['name']} ({', '.join(extra)})")
    return {**config, "defenses": "; ".join(described) or "none"}


def _seeds(results: pd.DataFrame) -> list[tuple[str, str]]:
    """The seeds of each (method, dataset, attack, defense) cell."""
    cells = results.groupby(["method", "dataset", "attack", "defense"], sort=False)["seed"]
    return [(" / ".join(map(str, key)), ", ".join(map(str, sorted(set(seeds))))) for key, seeds in cells]


def image(path: Path) -> str:
    """A PNG file embedded as a data URI (the page fetches nothing)."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f"<img alt='{html.escape(path.stem)}' src='data:image/png;base64,{data}'>"


@dataclass
class Section:
    """A part of the page: its anchor, title, HTML body and its own parts (the navigation lists them, nested)."""

    id: str
    title: str
    body: str = ""
    children: list[Section] = field(default_factory=list)

    def html(self, depth: int = 2) -> str:
        level = min(depth, 6)
        return (f"<section id='{html.escape(self.id)}'><h{level}>{html.escape(self.title)}</h{level}>{self.body}"
                + "".join(c.html(depth + 1) for c in self.children) + "</section>")

    def nav(self) -> str:
        inner = "".join(c.nav() for c in self.children)
        return (f"<li><a href='#{html.escape(self.id)}'>{html.escape(self.title)}</a>"
                + (f"<ul>{inner}</ul>" if inner else "") + "</li>")


def anchor(*parts: str) -> str:
    """An id for a section, from its names (letters, digits and dashes)."""
    return "-".join(re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in parts)


def render_report(results: pd.DataFrame, *, title: str, context: dict[str, str], sections: list[Section]) -> str:
    """The report page, read top-down: what it covers, the contents, then ``sections`` (one per secret, the labels
    first: verdicts, each attack, each defense), the non-federated references, the configuration and failed runs."""
    shared, varying = _settings(results)
    counts = results["status"].value_counts().to_dict()
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts.append("<table><tbody>" + "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
                                             for k, v in context.items()) + "</tbody></table>")
    parts.append(f"<p>{plural(len(results), 'run')} on {plural(results['training_key'].nunique(), 'training')}: "
                 + ", ".join(f"{v} {html.escape(str(k))}" for k, v in counts.items())
                 + f"; methods {html.escape(', '.join(dict.fromkeys(results['method'])))}; datasets "
                 f"{html.escape(', '.join(dict.fromkeys(results['dataset'])))}.</p>")
    configuration = Section("configuration", "Configuration", _configuration(results, shared, varying))
    failed = results[results["status"] == "failed"]
    tail = [configuration] + ([Section("failed", "Failed runs", "<ul>" + "".join(
        f"<li>{html.escape(f'{r.method} / {r.dataset} / {r.attack} / {r.defense}={r.strength:g}, seed {r.seed}')}: "
        f"{html.escape(r.error)}</li>" for r in failed.itertuples()) + "</ul>")] if not failed.empty else [])
    everything = [*sections, *tail]
    parts.append("<nav><h2>Contents</h2><ul>" + "".join(s.nav() for s in everything) + "</ul></nav>")
    parts += [s.html() for s in everything]
    parts.append("</body></html>")
    return "\n".join(parts)


def _configuration(results: pd.DataFrame, shared: list[tuple[str, str]], varying: dict) -> str:
    parts = ["<h3>Settings that differ between runs</h3>"]
    if varying:
        parts.append("<table><thead><tr><th>setting</th><th>value</th><th>runs (method / dataset / attack)</th></tr>"
                     "</thead><tbody>" + "".join(
                         f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(v)}</td>"
                         f"<td>{html.escape('; '.join(cells))}</td></tr>"
                         for k, values in varying.items() for v, cells in values.items()) + "</tbody></table>")
    else:
        parts.append("<p>none</p>")
    parts.append("<h3>Seeds</h3><table><thead><tr><th>method / dataset / attack / defense</th><th>seeds</th></tr>"
                 "</thead><tbody>" + "".join(f"<tr><td>{html.escape(c)}</td><td>{html.escape(v)}</td></tr>"
                                             for c, v in _seeds(results)) + "</tbody></table>")
    parts.append("<h3>Settings every run shares</h3><table><thead><tr><th>setting</th><th>value</th></tr></thead><tbody>"
                 + "".join(f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(v)}</td></tr>" for k, v in shared)
                 + "</tbody></table>")
    return "".join(parts)
