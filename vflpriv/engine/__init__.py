"""Parties, messages, the channel every cross-party tensor goes through, the training loop's hook
points, and the adversary's view and hooks.

May import: common, config, store, data, models.
"""

from vflpriv.engine.channel import Channel, Inbox, Meter, Received
from vflpriv.engine.hooks import (
    ACTIVE_BACKWARD,
    ACTIVE_BATCH,
    ACTIVE_LOSS,
    ACTIVE_MODEL,
    AUDIT_EMBEDDINGS,
    AUDIT_UPDATE,
    DEFENSE_POINTS,
    EPOCH_END,
    GRADIENT_COMPUTATION,
    PASSIVE_BACKWARD,
    PASSIVE_BOTTOM,
    PASSIVE_LOSS,
    PASSIVE_OPTIMIZER,
    PASSIVE_POINTS,
    PASSIVE_STEP,
    PREDICTIONS,
    PRETRAIN_PASSIVE_LOSS,
    SOFT_LABELS,
    SOFT_TARGETS,
    ActiveUpdate,
    AuditRead,
    CombinedHooks,
    DefenseChain,
    DefensePoints,
    PassiveStep,
    TrainingHooks,
)
from vflpriv.engine.message import (
    ACTIVE,
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    HEAD_WEIGHTS,
    INFERENCE,
    PRETRAIN,
    PROBABILITIES,
    SERVER,
    STATISTICS,
    WEIGHTS,
    Message,
)
from vflpriv.engine.party import ActiveParty, Federation, Party, make_parties
from vflpriv.engine.roles import SPLIT_LEARNING, Role, Traffic, passive_receives, role

__all__ = [
    "ACTIVE", "EMBEDDING", "FINETUNE", "GRADIENT", "HEAD_WEIGHTS", "INFERENCE", "PRETRAIN", "PROBABILITIES", "SERVER", "STATISTICS", "WEIGHTS",
    "ACTIVE_BACKWARD", "ACTIVE_BATCH", "ACTIVE_LOSS", "ACTIVE_MODEL", "AUDIT_EMBEDDINGS", "AUDIT_UPDATE", "ActiveUpdate", "AuditRead", "CombinedHooks", "DEFENSE_POINTS", "EPOCH_END", "DefenseChain", "DefensePoints", "GRADIENT_COMPUTATION",
    "PASSIVE_BACKWARD", "PASSIVE_BOTTOM", "PASSIVE_LOSS", "PASSIVE_OPTIMIZER", "PASSIVE_POINTS", "PASSIVE_STEP",
    "PREDICTIONS", "PRETRAIN_PASSIVE_LOSS", "SOFT_LABELS", "SOFT_TARGETS", "PassiveStep", "SPLIT_LEARNING", "TrainingHooks", "ActiveParty", "Channel", "Federation", "Inbox", "Message", "Meter", "Party", "Received", "Role",
    "Traffic", "make_parties", "passive_receives", "role",
]
