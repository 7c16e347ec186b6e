"""What ``scripts/mutation.py`` mutates, and with which operators: every module whose output reaches a published number.

The scope, by group: the trade-off statistics (CAP, DCS, leakage and its verdicts, the empirical epsilon and its
pooling, the canary bounds' argument checks, the auditor's pooling, the tuned strength); the metrics every score is
computed with; the attacks' scoring, search and prior, and every label attack; every defense (its mechanism is what a
defended number measures); the auditors and the engine's guard on their reads; the feature attacks, their prior, metrics
and scoring; the reproductions' claim statistics (their verdicts, the selection, the table's means) and the lr chosen on
the validation split; the numbers ``reports/`` computes (verdict tables, canary bounds, the audit's summary, the paper
tables, the console tables, the plotted means); the engine's channel, the partition and the conformance check (what an
attack sees); the keys that decide which records a number is computed from, and the check that leaves out a record with
impossible canary fields. Left out, as they compute no number: the CLI, the stores' I/O, the HTML page's layout
(``reports/html.py``) and the label placement of plots (``reports/labels.py``), the methods' training loops (their
output is a model, measured through the attacks' numbers on it).

Each module is mutated with the tests that must kill its mutants (pytest arguments, targeted and fast first: ``-x``
stops at the first failure), optionally in some functions only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

#: The core operators kept: one replacement per arithmetic, comparison, boolean and unary operator, every numeric
#: constant, loops that never run, and ``if``/``while`` conditions negated.
KEPT = [
    "ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|Pow_Mul|FloorDiv_Div|Mod_FloorDiv|BitAnd_BitOr|"
    "BitOr_BitAnd)",
    "ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Is_IsNot|IsNot_Is)",
    "ReplaceUnaryOperator_(USub_UAdd|Delete_Not)",
    "ReplaceTrueWithFalse", "ReplaceFalseWithTrue", "ReplaceAndWithOr", "ReplaceOrWithAnd", "ReplaceBreakWithContinue",
    "NumberReplacer", "ZeroIterationForLoop", "AddNot",
]
#: The string-constant operator (seed-stream names, keys), from vflpriv's operator provider plugin
#: (``scripts/mutation_operators``, installed beside the ``mutation`` extra).
STRING_OPERATOR = "vflpriv/ReplaceStringConstant"


@dataclass(frozen=True)
class Group:
    """Modules mutated one session each, with the tests that must kill their mutants, and for some modules the only
    functions to mutate."""

    tests: dict[str, list[str]]
    functions: dict[str, list[str]] = field(default_factory=dict)

    @property
    def modules(self) -> list[str]:
        return list(self.tests)


CANARIES = "tests/audit/test_canaries.py"
BOUND_EDGES = "tests/audit/test_canary_bound_edges.py"
KEY_TESTS = ["tests/core/test_keys.py", "tests/core/test_published_numbers.py", "tests/core/test_config.py"]
ANCHORS = "tests/attacks/test_attacks_anchors.py"
SCORED = "tests/attacks/test_scored_targets.py"
DEFENSE_ANCHORS = "tests/defenses/test_defenses_anchors.py"
IN_TRAINING = "tests/defenses/test_defenses_in_training.py"
ISSUE36 = "tests/defenses/test_defenses_issue36.py"
FEATURE_DEFENSES = "tests/defenses/test_feature_defenses.py"
GRID_REPORT = "tests/reports/test_grid_tables_report.py"
FEATURES = "tests/features/"


def _attack(own: list[str]) -> list[str]:
    return [*own, ANCHORS, SCORED]


GROUPS = {
    "tradeoff": Group({
        "tradeoff/cap.py": ["tests/core/test_cap_tables.py", "tests/core/test_published_numbers.py",
                            "tests/core/test_cap.py", "tests/core/test_cap_worst_case_without_prior.py"],
        "tradeoff/worst_case.py": ["tests/core/test_cap_tables.py", "tests/core/test_cap_worst_case_without_prior.py",
                                   "tests/reports/test_worst_case_unmeasured.py"],
        "tradeoff/scores.py": ["tests/core/test_cap_tables.py", "tests/reports/test_feature_tables.py"],
        "tradeoff/leakage.py": ["tests/audit/test_leakage_stats.py", "tests/audit/test_leakage_one_seed.py",
                                "tests/core/test_published_numbers.py"],
        "tradeoff/epsilon.py": ["tests/audit/test_epsilon_table_edges.py", "tests/audit/test_epsilon_pooling.py",
                                "tests/audit/test_canary_bound.py", CANARIES, "tests/audit/test_report_holm.py",
                                "tests/defenses/test_dp_coverage.py"],
        "vflpriv/common/canary_bound.py": [BOUND_EDGES, "tests/audit/test_canaries_needed_edges.py",
                                           "tests/audit/test_canary_bound.py",
                                           "tests/audit/test_epsilon_pooling.py", "tests/audit/test_auditor_pair.py"],
        "vflpriv/common/empirical_epsilon.py": [BOUND_EDGES, "tests/audit/test_epsilon_pooling.py", CANARIES,
                                                "tests/attacks/test_scoring_by_hand.py"],
        "vflpriv/common/fdp_one_run.py": [BOUND_EDGES, "tests/audit/test_fdp_one_run.py",
                                          "tests/audit/test_fdp_k_candidates.py", "tests/audit/test_canary_bound.py",
                                          "tests/audit/test_auditor_pair.py"],
        "vflpriv/common/bound_args.py": ["tests/audit/test_bound_inputs.py", BOUND_EDGES],
        "tradeoff/auditing.py": ["tests/audit/test_auditor_pooling.py", "tests/audit/test_auditor.py"],
        "tradeoff/tune.py": [GRID_REPORT, "tests/cli/test_cli.py", "-k", "tune"],
    }),
    "metrics": Group({"vflpriv/common/metrics.py": ["tests/core/test_metrics.py", "tests/attacks/test_attack_scoring.py",
                                                    "tests/core/test_validation_split.py"]}),
    "scoring": Group({
        "vflpriv/runner/scoring.py": ["tests/attacks/test_scoring_by_hand.py", SCORED,
                                      "tests/attacks/test_attack_scoring.py", CANARIES],
        "attacks/search.py": [SCORED, "tests/attacks/test_search_sampler_seed.py", "tests/attacks/test_attack_search.py"],
        "attacks/base.py": ["tests/attacks/test_attack_search.py", SCORED, "tests/attacks/test_attack_blindness.py"],
        "vflpriv/runner/attacking.py": ["tests/attacks/test_prior_keys.py", SCORED, "tests/attacks/test_attack_blindness.py",
                                        "tests/audit/test_own_ssl_prior.py"],
        "vflpriv/runner/execution.py": ["tests/core/test_validation_split.py", "tests/core/test_utility_curve.py",
                                        "tests/core/test_run.py"],
    }, functions={"vflpriv/runner/execution.py": ["train", "validation_utility", "__call__", "utility_optimistic"]}),
    "prior": Group({"vflpriv/runner/prior.py": ["tests/attacks/test_prior_keys.py", SCORED,
                                                "tests/audit/test_own_ssl_prior.py"]}),
    "attacks": Group({
        "attacks/labels/model_completion.py": _attack(["tests/attacks/test_attack_mc.py"]),
        "attacks/labels/mixmatch.py": _attack(["tests/attacks/test_attack_mixmatch.py"]),
        "attacks/labels/gradient_clustering.py": _attack(["tests/attacks/test_attack_gc.py"]),
        "attacks/labels/gradient_scoring.py": _attack(["tests/attacks/test_attack_scoring.py"]),
        "attacks/labels/gradients.py": _attack(["tests/attacks/test_attack_gc.py", "tests/attacks/test_attack_scoring.py"]),
        "attacks/labels/direct.py": _attack([]),
        "attacks/labels/batch_reconstruction.py": _attack([]),
        "attacks/labels/malicious.py": _attack(["tests/attacks/test_attacks_in_training.py"]),
        "attacks/labels/similarity.py": _attack([]),
        "attacks/labels/exploit.py": _attack([]),
    }),
    "defenses": Group({
        "defenses/base.py": ["tests/defenses/test_default_strengths.py", DEFENSE_ANCHORS, IN_TRAINING],
        "defenses/iso.py": ["tests/core/test_iso_defense.py", "tests/core/test_published_numbers.py",
                            "tests/defenses/test_defense_iso_channel.py"],
        "defenses/gaussian_message.py": [DEFENSE_ANCHORS],
        "defenses/dp_gaussian.py": ["tests/defenses/test_dp_gaussian.py", "tests/defenses/test_dp_gaussian_unbound.py"],
        "defenses/label_dp.py": ["tests/defenses/test_label_dp_two_stage.py", "tests/defenses/test_defense_label_dp.py",
                                 ISSUE36],
        "defenses/alibi.py": [ISSUE36],
        "defenses/fedpass.py": [ISSUE36],
        "defenses/peloss.py": [ISSUE36],
        "defenses/marvell.py": ["tests/defenses/test_defense_marvell.py"],
        "defenses/max_norm.py": ["tests/defenses/test_defense_max_norm.py"],
        "defenses/sparsify.py": ["tests/defenses/test_defense_sparsify.py", DEFENSE_ANCHORS],
        "defenses/discrete_sgd.py": [DEFENSE_ANCHORS, "tests/defenses/test_default_strengths.py"],
        "defenses/grad_perturb.py": [DEFENSE_ANCHORS, IN_TRAINING],
        "defenses/mid.py": [DEFENSE_ANCHORS, IN_TRAINING, FEATURE_DEFENSES],
        "defenses/dcor.py": [DEFENSE_ANCHORS, IN_TRAINING],
        "defenses/cae.py": [DEFENSE_ANCHORS, IN_TRAINING],
        "defenses/mixup.py": [DEFENSE_ANCHORS, IN_TRAINING, ISSUE36],
        "defenses/embedding_dp.py": ["tests/defenses/test_embedding_dp.py", FEATURE_DEFENSES],
        "defenses/per_sample.py": ["tests/defenses/test_embedding_dp.py"],
        "defenses/nopeek.py": [FEATURE_DEFENSES],
        "defenses/fi_adversarial.py": [FEATURE_DEFENSES],
        "defenses/passive.py": ["tests/defenses/test_victim_hook_points.py", FEATURE_DEFENSES],
    }),
    "features": Group({
        "vflpriv/common/feature_metrics.py": [FEATURES + "test_feature_metrics.py",
                                              FEATURES + "test_feature_metrics_edges.py", FEATURES + "test_fi_decoder.py",
                                              FEATURES + "test_grn_inversion.py"],
        "vflpriv/runner/feature_prior.py": [FEATURES + "test_feature_prior.py", FEATURES + "test_fi_decoder.py"],
        "vflpriv/runner/feature_attacking.py": [FEATURES + "test_known_samples_and_targets.py",
                                                FEATURES + "test_fi_decoder.py", FEATURES + "test_feature_verdicts.py"],
        "attacks/features/base.py": [FEATURES + "test_known_samples_and_targets.py", FEATURES + "test_fi_decoder.py"],
        "attacks/features/decoder_attack.py": [FEATURES + "test_fi_decoder.py", FEATURES + "test_feature_verdicts.py"],
        "attacks/features/decoders.py": [FEATURES + "test_fi_decoder.py", "tests/cli/test_feature_refusals.py"],
        "attacks/features/inversion.py": [FEATURES + "test_grn_inversion.py"],
        "attacks/features/grn.py": [FEATURES + "test_grn_inversion.py"],
        "attacks/features/surrogate.py": [FEATURES + "test_grn_inversion.py", ANCHORS],
    }),
    "auditors": Group({"auditors/base.py": ["tests/audit/test_auditor.py"],
                       "auditors/gradient_lrt.py": ["tests/audit/test_auditor_edges.py", "tests/audit/test_auditor.py",
                                                    "tests/audit/test_auditor_crafted.py",
                                                    "tests/audit/test_auditor_pair.py"],
                       "auditors/crafted.py": ["tests/audit/test_auditor_crafted.py",
                                               "tests/audit/test_auditor_pair.py"],
                       "vflpriv/engine/audit_guard.py": ["tests/audit/test_audit_read_guard.py"]}),
    "claims": Group({
        "vflpriv/workflows/reproductions/claims.py": ["tests/core/test_claims_by_hand.py"],
        "vflpriv/workflows/reproductions/selection.py": ["tests/core/test_validation_split.py",
                                                         "tests/cli/test_reproduce.py"],
        "vflpriv/workflows/reproductions/report.py": ["tests/cli/test_reproduce.py"],
        "vflpriv/workflows/lr_choice.py": ["tests/cli/test_settings_honoured.py", "-k", "lr"],
    }),
    "reports": Group({
        "reports/leakage.py": ["tests/audit/test_leakage_stats.py", "tests/core/test_published_numbers.py", GRID_REPORT,
                               "tests/audit/test_audit.py"],
        "reports/canaries.py": ["tests/audit/test_auditor.py", CANARIES],
        "reports/audit.py": ["tests/core/test_published_numbers.py", "tests/audit/test_audit.py"],
        "reports/paper_tables.py": [GRID_REPORT],
        "reports/tables.py": ["tests/reports/test_one_seed.py", "tests/core/test_cap.py", GRID_REPORT],
        "reports/plots.py": ["tests/core/test_cap.py", GRID_REPORT],
        "reports/results.py": [GRID_REPORT],
        "reports/features.py": [FEATURES + "test_feature_leakage.py", "tests/audit/test_feature_audit.py"],
        "reports/secret_labels.py": [GRID_REPORT, "tests/reports/test_report_navigation.py"],
    }),
    "engine": Group({
        "vflpriv/engine/channel.py": ["tests/engine/test_channel.py"],
        "vflpriv/data/scenario.py": ["tests/core/test_scenario.py", "tests/core/test_scenario_draw_edges.py",
                                     "tests/core/test_validation_split.py", CANARIES,
                                     FEATURES + "test_known_samples_and_targets.py"],
        "vflpriv/workflows/conformance.py": ["tests/audit/test_conformance_edges.py", "tests/audit/test_audit.py",
                                             "tests/docs/test_plugin_guide.py", "-k",
                                             "conformance or labels_reaching or declared_top or roll or test_features "
                                             "or embedding"],
    }),
    "keys": Group({"vflpriv/config/keys.py": KEY_TESTS, "vflpriv/config/schema.py": KEY_TESTS,
                   "vflpriv/store/canary_fields.py": ["tests/reports/test_canary_records.py"]},
                  functions={"vflpriv/config/keys.py": ["config_hash", "keyed", "_revision"],
                             "vflpriv/config/schema.py": ["key", "training_key"]}),
}


def ranges(nodes: list[ast.stmt]) -> list[tuple[int, int]]:
    """Lines of ``nodes`` to mutate: functions and module-level statements whole, except the module's constants
    (``NAME = ...`` in capitals, without code: declared settings such as a head's recipe, as a class body's option defaults, bounds,
    audit strengths and strength axes are; of a class, only its methods are mutated)."""
    found = []
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            found += ranges([n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.ClassDef))])
        elif not _constant(node):
            found.append((node.lineno, node.end_lineno))
    return found


def _constant(node: ast.stmt) -> bool:
    """Whether ``node`` declares a module constant: ``NAME = value`` or ``NAME: type = value``, NAME in capitals, and
    no code in the value (a table of lambdas, such as the metrics' ``UTILITIES``, is code)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return bool(targets) and all(isinstance(t, ast.Name) and t.id.isupper() for t in targets) \
        and not any(isinstance(n, ast.Lambda) for n in ast.walk(node))


def lines(root: Path, module: str, functions: list[str]) -> list[str]:
    """The line ranges to mutate in ``module``: every definition of ``functions`` if given, else :func:`ranges`."""
    tree = ast.parse((root / module).read_text())
    if functions:
        spans = [(n.lineno, n.end_lineno) for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in functions]
    else:
        spans = ranges(tree.body)
    return [f"{a}-{b}" for a, b in spans]
