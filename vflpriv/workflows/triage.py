"""Attack triage of a multi-attack evaluate or sweep: the attacks the method, task and phase allow, each other set
aside with its reason, and the console lines of runs recorded not applicable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vflpriv.common.console import plural
from vflpriv.common.errors import ConfigError, IncompatibleError, UnfitOptionsError
from vflpriv.config.parse import as_written
from vflpriv.config.schema import RunConfig

if TYPE_CHECKING:
    import pandas as pd


def not_applicable_lines(results: pd.DataFrame) -> list[str]:
    """One console line per attack, phase and reason whose runs were recorded not applicable (a non-federated method:
    run for the utility and the prior a table compares with), which nothing else says where no defense is swept."""
    runs = results[results["status"] == "n/a"]
    held = {"labels": "the utility and the adversary's prior only"}  # a label prior is what it learns alone
    return [f"not applicable: {attack} ({phase}), {plural(len(rows), 'run')}: {reason}; its records hold "
            f"{held.get(secret, 'the utility only')}" for (attack, phase, reason, secret), rows
            in runs.groupby(["attack", "phase", "error", "secret"], sort=False)]


def applicable_attacks(runs: list[RunConfig]) -> tuple[list[RunConfig], list[tuple[str, str]]]:
    """With several attacks, the runs of those the method, task and phase allow, each other set aside with its reason
    (as the audit does); refused: one attack alone, none applicable, an option given that the data leaves unread."""
    from vflpriv.runner.planning import plan

    names = list(dict.fromkeys(r.attack.name for r in runs))
    if len(names) < 2:
        return runs, []
    kept, set_aside = [], []
    for name in names:
        mine = [r for r in runs if r.attack.name == name]
        first = mine[0].training_key()
        try:
            plan([r for r in mine if r.training_key() == first])
        except UnfitOptionsError as exc:  # the user's own options: only they set them for this attack
            raise ConfigError(as_written(str(exc), f"attack.options.{name}", f"attack.search_space.{name}")) from None
        except IncompatibleError as exc:
            set_aside.append((name, str(exc).removeprefix(f"attack '{name}': ")))
            continue
        kept += mine
    if not kept:
        raise IncompatibleError("no attack applies: " + "; ".join(f"{n}: {reason}" for n, reason in set_aside))
    return kept, set_aside
