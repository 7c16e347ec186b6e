"""Composable SSL building blocks: losses, heads, momentum targets, a negatives queue, views.

Small pieces in the Lightly style; the pretraining methods (FedHSSL, VFLHLP, SS-VFL) wire them.
"""

from vflpriv.models.ssl.augment import (
    Augment,
    FeatureRanges,
    ImageViews,
    augment_image,
    augment_images,
    box_grid,
    corrupt_tabular,
    make_augmenter,
    scarf_corrupt,
    stacked_views,
    two_views,
)
from vflpriv.models.ssl.heads import predictor, projector
from vflpriv.models.ssl.losses import byol_loss, info_nce, negative_cosine, nt_xent, symmetrized
from vflpriv.models.ssl.momentum import momentum_copy, momentum_updater, update_momentum
from vflpriv.models.ssl.queue import MemoryQueue

__all__ = [
    "Augment",
    "FeatureRanges",
    "ImageViews",
    "MemoryQueue",
    "augment_image",
    "augment_images",
    "box_grid",
    "byol_loss",
    "corrupt_tabular",
    "info_nce",
    "nt_xent",
    "make_augmenter",
    "momentum_copy",
    "momentum_updater",
    "negative_cosine",
    "predictor",
    "projector",
    "scarf_corrupt",
    "stacked_views",
    "symmetrized",
    "two_views",
    "update_momentum",
]
