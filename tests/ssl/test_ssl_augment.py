"""SSL views: FedHSSL tabular corruption, SCARF, image crop+flip, two views, per-party factory."""

import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.data.base import PartySpec
from vflpriv.models.ssl import (
    FeatureRanges,
    augment_image,
    augment_images,
    box_grid,
    corrupt_tabular,
    make_augmenter,
    scarf_corrupt,
    stacked_views,
    two_views,
)

SPEC = PartySpec("tabular", (8,), cardinalities=(5, 5))


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tabular(n: int = 40, seed: int = 0) -> torch.Tensor:
    """Two categorical columns with indices 1..4 (never the unknown 0), six continuous ones."""
    g = _gen(seed)
    cat = torch.randint(1, 5, (n, 2), generator=g).float()
    return torch.cat([cat, torch.randn(n, 6, generator=g)], dim=1)


@pytest.mark.parametrize(("rate", "k"), [(0.0, 0), (0.3, 2), (0.5, 4), (1.0, 8)])
def test_corrupt_tabular_changes_exact_count_per_row(rate: float, k: int) -> None:
    x = _tabular()
    out = corrupt_tabular(x, FeatureRanges.fit(x, SPEC), rate=rate, generator=_gen())
    assert out.shape == x.shape
    assert torch.equal((out != x).sum(dim=1), torch.full((40,), k))


def test_corrupt_tabular_values_in_range_and_categorical_unknown() -> None:
    train = _tabular(200, seed=1)
    ranges = FeatureRanges.fit(train, SPEC)
    x = _tabular(50)
    out = corrupt_tabular(x, ranges, rate=0.5, generator=_gen())
    changed = out != x
    assert torch.all(out[:, :2][changed[:, :2]] == 0)
    num, num_changed = out[:, 2:], changed[:, 2:]
    low, high = ranges.low.expand_as(num), ranges.high.expand_as(num)
    assert torch.all(num[num_changed] >= low[num_changed])
    assert torch.all(num[num_changed] <= high[num_changed])
    assert len({tuple(row) for row in changed.tolist()}) > 1  # each sample draws its own subset
    assert torch.equal(x, _tabular(50))  # input untouched


def test_feature_ranges_fit_numeric_columns_only() -> None:
    x = _tabular()
    ranges = FeatureRanges.fit(x, SPEC)
    assert torch.equal(ranges.low, x[:, 2:].amin(0)) and torch.equal(ranges.high, x[:, 2:].amax(0))
    with pytest.raises(ConfigError):
        FeatureRanges.fit(x, PartySpec("image", (1, 2, 4)))


def test_scarf_values_come_from_pool_same_column() -> None:
    m, d = 30, 8
    # each pool value encodes its (row, col)
    pool = 1000.0 + torch.arange(m * d, dtype=torch.float32).reshape(m, d)
    x = _tabular()
    out = scarf_corrupt(x, pool, rate=0.6, generator=_gen())
    changed = out != x
    assert torch.equal(changed.sum(dim=1), torch.full((40,), 5))  # round(0.6 * 8)
    cols = torch.arange(d).expand(40, d)
    assert torch.equal((out[changed] - 1000).long() % d, cols[changed])
    rows = (out[changed] - 1000).long() // d
    assert rows.unique().numel() > 1  # rows drawn at random, not one fixed donor


@pytest.mark.parametrize("shape", [(1, 8, 4), (1, 28, 14), (3, 5, 7)])
def test_augment_image_shape_and_seed_determinism(shape: tuple[int, int, int]) -> None:
    x = torch.rand(6, *shape, generator=_gen(9))
    a = augment_image(x, generator=_gen(1))
    assert a.shape == x.shape
    assert torch.equal(a, augment_image(x, generator=_gen(1)))
    assert not torch.allclose(a, augment_image(x, generator=_gen(2)))


def test_full_crop_is_identity_or_mirror() -> None:
    x = torch.rand(16, 1, 8, 4, generator=_gen())
    same = augment_image(x, generator=_gen(), crop_scale=(1.0, 1.0), flip=False)
    assert torch.allclose(same, x, atol=1e-5)
    out = augment_image(x, generator=_gen(), crop_scale=(1.0, 1.0))
    plain = (out - x).abs().amax(dim=(1, 2, 3)) < 1e-5
    mirror = (out - x.flip(-1)).abs().amax(dim=(1, 2, 3)) < 1e-5
    assert torch.all(plain | mirror) and plain.any() and mirror.any()


def test_two_views() -> None:
    x = _tabular()
    aug = make_augmenter(SPEC, x)
    v1, v2 = two_views(x, aug, clean_first=True, generator=_gen())
    assert v1 is x and not torch.equal(v2, x)
    w1, w2 = two_views(x, aug, generator=_gen())
    assert not torch.equal(w1, w2)
    assert all(torch.equal(a, b) for a, b in zip((w1, w2), two_views(x, aug, generator=_gen())))


def test_make_augmenter_dispatches_on_spec() -> None:
    x = _tabular()
    uniform = make_augmenter(SPEC, x)(x, _gen())
    assert torch.equal((uniform != x).sum(dim=1), torch.full((40,), 2))
    assert torch.all(uniform[:, :2][uniform[:, :2] != x[:, :2]] == 0)
    scarf = make_augmenter(SPEC, x, tabular="scarf")(x, _gen())
    assert torch.all((scarf[:, :2] >= 1) & (scarf[:, :2] <= 4))  # SCARF keeps valid categories
    images = torch.rand(4, 1, 8, 4, generator=_gen())
    image_aug = make_augmenter(PartySpec("image", (1, 8, 4)), images)
    assert image_aug(images, _gen()).shape == images.shape
    with pytest.raises(ConfigError):
        make_augmenter(SPEC, x, tabular="gaussian")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        make_augmenter(SPEC, x, rate=1.5)


RANDOM_FNS = {
    "corrupt_tabular": lambda g: corrupt_tabular(
        _tabular(), FeatureRanges.fit(_tabular(), SPEC), generator=g
    ),
    "scarf_corrupt": lambda g: scarf_corrupt(_tabular(), _tabular(seed=3), generator=g),
    "augment_image": lambda g: augment_image(torch.ones(4, 3, 6, 6).cumsum(-1), generator=g),
    "two_views": lambda g: torch.cat(
        two_views(_tabular(), make_augmenter(SPEC, _tabular()), generator=g)
    ),
}


@pytest.mark.parametrize("name", sorted(RANDOM_FNS))
def test_identical_seeds_identical_outputs_global_rng_untouched(name: str) -> None:
    fn = RANDOM_FNS[name]
    state = torch.get_rng_state()
    a, b = fn(_gen(5)), fn(_gen(5))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a, b)
    assert not torch.equal(a, fn(_gen(6)))


def test_augment_images_matches_one_call_per_batch_bit_for_bit() -> None:
    """MixMatch augments its labeled batch and K unlabeled views in one resampling: the same draws in the same order
    and the same pixels as one ``augment_image`` call per batch."""
    g = torch.Generator().manual_seed(3)
    batches = [torch.rand(n, 1, 8, 4, generator=g) for n in (16, 13, 13)]
    g1 = torch.Generator().manual_seed(7)
    one_by_one = [augment_image(b, generator=g1, crop_scale=(0.8, 1.0), flip=False) for b in batches]
    together = augment_images(batches, generator=torch.Generator().manual_seed(7), crop_scale=(0.8, 1.0), flip=False)
    assert [t.shape for t in together] == [b.shape for b in batches]
    for a, b in zip(one_by_one, together):
        assert torch.equal(a, b)


IMAGE = PartySpec("image", (1, 8, 4))
VIEW_OPTIONS = {
    "crop and flip (one resampling)": {},
    "no flip, tight crops": {"crop_scale": (0.8, 1.0), "flip": False},
    "jitter (a draw between the crops)": {"jitter": (0.4, 0.4, 0.0, 0.0)},
    "blur": {"blur_sigma": (0.1, 2.0)},
}


@pytest.mark.parametrize("name", sorted(VIEW_OPTIONS))
@pytest.mark.parametrize("clean_first", [False, True])
@pytest.mark.parametrize("n", [128, 29])
def test_stacked_views_are_the_two_views_concatenated_bit_for_bit(name: str, clean_first: bool, n: int) -> None:
    """Local SSL feeds [v1; v2] from one resampling: the pixels of ``two_views`` (one ``augment_image`` per view),
    and the generator left where two calls leave it (the next batch's views are the same too)."""
    images = torch.rand(n, 1, 8, 4, generator=_gen(4))
    aug = make_augmenter(IMAGE, images, **VIEW_OPTIONS[name])
    g_two, g_stacked = _gen(9), _gen(9)
    for _ in range(2):
        expected = torch.cat(two_views(images, aug, clean_first=clean_first, generator=g_two))
        stacked = stacked_views(images, aug, clean_first=clean_first, generator=g_stacked)
        assert stacked.shape == (2 * n, 1, 8, 4)
        assert torch.equal(stacked, expected)


def test_stacked_views_of_a_table_are_the_two_views_concatenated() -> None:
    x = _tabular()
    aug = make_augmenter(SPEC, x)
    assert torch.equal(stacked_views(x, aug, generator=_gen(2)), torch.cat(two_views(x, aug, generator=_gen(2))))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("h, w", [(8, 4), (28, 14), (32, 32), (7, 5), (1, 3)])
def test_box_grid_is_affine_grid_bit_for_bit(dtype: torch.dtype, h: int, w: int) -> None:
    """The crops' sampling grid, written out per axis, has the values ``F.affine_grid`` gives for the same thetas
    (flipped boxes, negative scales, included), so the views are the pixels they were with ``affine_grid``."""
    g = _gen(11)
    n = 192
    scale_x, scale_y = torch.rand(2, n, generator=g, dtype=dtype) * 2 - 1
    shift_x, shift_y = torch.rand(2, n, generator=g, dtype=dtype) - 0.5
    theta = torch.zeros(n, 2, 3, dtype=dtype)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = scale_x, shift_x, scale_y, shift_y
    expected = torch.nn.functional.affine_grid(theta, [n, 1, h, w], align_corners=False)
    assert torch.equal(box_grid(scale_x, shift_x, scale_y, shift_y, h=h, w=w), expected)
