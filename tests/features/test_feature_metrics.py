"""The feature scores on hand-computed examples and against a reference implementation of the SSIM formula
(scipy's correlation with the same window; scikit-image's where it is installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import ndimage

from vflpriv.common import feature_metrics as fm


def test_mse_over_all_elements_per_target_and_per_feature_by_hand():
    truth = torch.tensor([[[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.5]]])  # 2 targets of shape (1, 3)
    guess = torch.tensor([[[0.0, 1.0, 1.0]], [[0.0, 0.0, 0.0]]])
    # squared errors: target 0: 0, 1, 0 -> 1/3; target 1: 1, 0, 0.25 -> 1.25/3
    assert fm.per_target_mse(guess, truth).tolist() == pytest.approx([1 / 3, 1.25 / 3])
    assert fm.mse(guess, truth) == pytest.approx(2.25 / 6)
    assert fm.per_feature_mse(guess, truth).tolist() == pytest.approx([0.5, 0.5, 0.125])
    assert fm.ap(fm.mse(guess, truth)) == pytest.approx(1 - 2.25 / 6)
    assert fm.ap(1.7) == 0.0  # VFLAIR's max(0, 1 - MSE)
    with pytest.raises(ValueError, match="shape"):
        fm.mse(guess[:, :, :2], truth)


def test_psnr_by_hand():
    assert fm.psnr(0.01) == pytest.approx(20.0)  # 20 log10(1 / sqrt(0.01)) = 20 log10(10)
    assert fm.psnr(0.25) == pytest.approx(20 * math.log10(2))
    assert fm.psnr(0.0) == math.inf


def _reference_ssim_map(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The SSIM formula (Wang et al. 2004) written out with scipy: each moment by correlation with the normalised 11x11
    Gaussian (sigma 1.5), zero outside the image; C1 = 0.01^2, C2 = 0.03^2."""
    x = np.arange(11) - 5
    g = np.exp(-x**2 / (2 * 1.5**2))
    window = np.outer(g, g) / g.sum() ** 2
    blur = lambda t: ndimage.correlate(t, window, mode="constant", cval=0.0)  # noqa: E731
    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b, cov = blur(a * a) - mu_a**2, blur(b * b) - mu_b**2, blur(a * b) - mu_a * mu_b
    c1, c2 = 0.01**2, 0.03**2
    return (2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))


def test_ssim_matches_the_formula_written_out_with_scipy_per_image_and_channel():
    g = torch.Generator().manual_seed(0)
    truth = torch.rand(2, 3, 20, 14, generator=g, dtype=torch.float64)
    guess = (truth + 0.2 * torch.randn(truth.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    ours = fm.ssim_map(guess, truth).numpy()
    for n in range(2):
        for c in range(3):
            np.testing.assert_allclose(ours[n, c], _reference_ssim_map(guess[n, c].numpy(), truth[n, c].numpy()),
                                       rtol=1e-9, atol=1e-12)
    assert fm.ssim(guess, truth).tolist() == pytest.approx(ours.reshape(2, -1).mean(1).tolist(), rel=1e-12)
    assert fm.ssim(truth, truth).tolist() == pytest.approx([1.0, 1.0], abs=1e-12)


def test_ssim_of_one_pixel_images_by_hand():
    """A 1x1 image sees only the window's centre weight w (zero padding): mu = w x, var = w (1 - w) x^2, cov alike."""
    g = np.exp(-(np.arange(11) - 5) ** 2 / 4.5)
    w = (1 / g.sum()) ** 2
    a, b = 0.8, 0.3
    mu_a, mu_b, var_a, var_b, cov = w * a, w * b, w * (1 - w) * a * a, w * (1 - w) * b * b, w * (1 - w) * a * b
    c1, c2 = 1e-4, 9e-4
    expected = (2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    got = fm.ssim(torch.full((1, 1, 1, 1), a), torch.full((1, 1, 1, 1), b))
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_ssim_interior_matches_scikit_image():
    metrics = pytest.importorskip("skimage.metrics", reason="scikit-image is not installed (an optional cross-check)")
    g = torch.Generator().manual_seed(1)
    truth = torch.rand(1, 1, 32, 24, generator=g, dtype=torch.float64)
    guess = (truth + 0.1 * torch.randn(truth.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    _, full = metrics.structural_similarity(guess[0, 0].numpy(), truth[0, 0].numpy(), gaussian_weights=True,
                                            sigma=1.5, use_sample_covariance=False, data_range=1.0, full=True)
    ours = fm.ssim_map(guess, truth)[0, 0].numpy()
    np.testing.assert_allclose(ours[5:-5, 5:-5], full[5:-5, 5:-5], rtol=1e-9)  # borders: zero vs reflect padding


def test_exact_match_snaps_to_the_column_s_values_and_reports_each_column():
    rows = torch.tensor([[0.0, 0.2, 0.0], [1.0, 0.7, 0.5], [1.0, 0.9, 1.0]])  # col 0 binary, col 1 numeric, col 2 3 codes
    levels = fm.discrete_levels(rows, categorical=0)
    assert sorted(levels) == [0]  # only the binary column without declared categoricals
    levels = fm.discrete_levels(rows[:, [2, 0, 1]], categorical=1)
    assert sorted(levels) == [0, 1]  # the leading categorical column and the binary one
    truth = torch.tensor([[0.0, 1.0], [0.5, 0.0]])
    guess = torch.tensor([[0.2, 0.6], [0.9, 0.49]])  # snapped: [0, 1] right; [1.0, 0] -> first wrong, second right
    mean, per_column = fm.exact_match(guess, truth, {0: torch.tensor([0.0, 0.5, 1.0]), 1: torch.tensor([0.0, 1.0])})
    assert per_column == [0.5, 1.0] and mean == 0.75
    assert math.isnan(fm.exact_match(guess, truth, {})[0])


def test_scales_fitted_on_training_rows():
    x = torch.tensor([[0.0, 5.0, 2.0], [10.0, 7.0, 2.0]])
    low, span = fm.fit_scale(x, image=False)
    assert fm.scaled(x, low, span).tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]  # a constant column maps to 0
    assert fm.scaled(torch.tensor([[20.0, 6.0, 3.0]]), low, span).tolist() == [[2.0, 0.5, 1.0]]  # not clipped
    image = torch.tensor([[[[0.0, 4.0], [8.0, 2.0]]]])
    ilow, ispan = fm.fit_scale(image, image=True)  # one range for every pixel
    assert fm.scaled(image, ilow, ispan).flatten().tolist() == [0.0, 0.5, 1.0, 0.25]
    other = fm.fit_scale(x[:1] + 1, image=False)
    back = fm.rescaled(fm.scaled(x, *other), other, (low, span))
    assert torch.allclose(back, fm.scaled(x, low, span))
