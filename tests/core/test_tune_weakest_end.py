"""Review hunt2 N10: where the searched range's weakest end already suffices, ``tune`` says it is the weakest strength
searched and that nothing weaker was tried (tune.json: ``at_weakest_end``), not that it is the weakest that suffices."""

import pandas as pd

from vflpriv.tradeoff.tune import found_text, tune


def _records(leak: float) -> pd.DataFrame:
    return pd.DataFrame({"status": "ok", "seed": range(4), "attack_accuracy": [0.1 + leak] * 4,
                         "prior_accuracy": [0.1, 0.12, 0.11, 0.13], "utility": 0.9, "error": ""})


def _tuned(threshold: float, *, stronger_is_lower: bool = False):
    """A search over [0.25, 4] whose attack fails (far below the prior) from ``threshold`` on."""
    def evaluate(s):
        return _records(-0.5 if (s <= threshold if stronger_is_lower else s >= threshold) else 0.3)
    return tune(evaluate, axis="sigma", stronger_is_lower=stronger_is_lower, low=0.25, high=4.0, log=True,
                tolerance=0.02, steps=4)


def test_the_weakest_end_sufficing_is_said_as_such():
    result = _tuned(0.0)
    assert result.found.strength == 0.25 and result.at_weakest_end and result.to_dict()["at_weakest_end"]
    text = found_text(result, attack="mc", stronger_is_lower=False)
    assert text.startswith("weakest sigma searched whose paired test shows mc within 0.02 of the prior: 0.25")
    assert "none weaker was tried" in text and "lower --low, or compare with --defense none" in text
    assert "raise --high" in found_text(_tuned(10.0, stronger_is_lower=True), attack="mc", stronger_is_lower=True)


def test_a_bisected_strength_is_not_flagged():
    result = _tuned(1.0)
    assert 0.25 < result.found.strength < 4 and not result.at_weakest_end
    assert "none weaker" not in found_text(result, attack="mc", stronger_is_lower=False)
