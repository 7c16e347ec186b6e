"""Colour jitter and Gaussian blur views: torchvision's semantics checked as properties and against colorsys."""

import colorsys

import pytest
import torch

from vflpriv.data.base import PartySpec
from vflpriv.methods.fedhssl import HybridOptions
from vflpriv.models.ssl import make_augmenter
from vflpriv.models.ssl.photometric import _contrast, _hue, _saturation, color_jitter, gaussian_blur


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(n: int = 16, channels: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, channels, 10, 12, generator=_gen(seed)) * 0.6 + 0.2


def test_jitter_with_zero_strength_or_zero_probability_is_identity() -> None:
    x = _images()
    assert torch.equal(color_jitter(x, strengths=(0, 0, 0, 0), p=1.0, generator=_gen()), x)
    assert torch.equal(color_jitter(x, strengths=(0.3, 0.3, 0.3, 0.1), p=0.0, generator=_gen()), x)


def test_saturation_and_hue_leave_grayscale_images_unchanged() -> None:
    """torchvision's ColorJitter is a no-op on a 1-channel image for these two."""
    x = _images(channels=1)
    assert torch.equal(color_jitter(x, strengths=(0, 0, 0.5, 0.2), p=1.0, generator=_gen()), x)
    assert not torch.equal(color_jitter(x, strengths=(0.3, 0.3, 0, 0), p=1.0, generator=_gen()), x)


def test_brightness_factor_lies_in_its_range_per_sample() -> None:
    x = torch.full((200, 1, 4, 4), 0.5)
    out = color_jitter(x, strengths=(0.3, 0, 0, 0), p=1.0, generator=_gen())
    factor = out[:, 0, 0, 0] / 0.5
    assert torch.allclose(out, factor.view(-1, 1, 1, 1) * 0.5)
    assert factor.min() >= 0.7 - 1e-6 and factor.max() <= 1.3 + 1e-6
    assert factor.std() > 0.1  # each sample draws its own factor


def test_jitter_probability_is_the_fraction_of_changed_samples() -> None:
    x = _images(n=2000, channels=1)
    out = color_jitter(x, strengths=(0.3, 0.3, 0, 0), p=0.8, generator=_gen())
    changed = (out != x).flatten(1).any(dim=1).float().mean()
    assert abs(changed.item() - 0.8) < 0.03


def test_contrast_keeps_the_gray_mean_and_saturation_zero_is_gray() -> None:
    x = _images(n=4)
    f = torch.tensor([0.7, 0.9, 1.1, 1.3])
    gray_mean = lambda t: (t * torch.tensor([0.2989, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1).mean(dim=(1, 2))
    assert torch.allclose(gray_mean(_contrast(x, f)), gray_mean(x), atol=1e-4)  # luma weights sum to 0.9999
    flat = _saturation(x, torch.zeros(4))
    assert torch.allclose(flat[:, 0], flat[:, 1]) and torch.allclose(flat[:, 1], flat[:, 2])


@pytest.mark.parametrize("shift", [0.0, 0.1, -0.25, 1 / 3, 0.5])
def test_hue_shift_matches_colorsys(shift: float) -> None:
    x = _images(n=3)
    out = _hue(x, torch.full((3,), shift))
    for pixel_in, pixel_out in zip(x.permute(0, 2, 3, 1).reshape(-1, 3), out.permute(0, 2, 3, 1).reshape(-1, 3)):
        h, s, v = colorsys.rgb_to_hsv(*pixel_in.tolist())
        expected = colorsys.hsv_to_rgb((h + shift) % 1.0, s, v)
        assert pixel_out.tolist() == pytest.approx(expected, abs=1e-5)


def test_blur_keeps_constant_images_and_smooths_noise() -> None:
    constant = torch.full((5, 1, 9, 7), 0.3)
    assert torch.allclose(gaussian_blur(constant, sigma=(0.1, 2.0), p=1.0, generator=_gen()), constant)
    noise = _images(n=50, channels=1)
    out = gaussian_blur(noise, sigma=(1.0, 2.0), p=1.0, generator=_gen())
    assert (out.flatten(1).std(dim=1) < 0.5 * noise.flatten(1).std(dim=1)).all()
    assert torch.allclose(out.mean(dim=(1, 2, 3)), noise.mean(dim=(1, 2, 3)), atol=0.03)


def test_blur_is_per_sample_random_and_seeded() -> None:
    x = _images(n=400, channels=1)
    out = gaussian_blur(x, sigma=(0.1, 2.0), p=0.5, generator=_gen(3))
    changed = (out - x).abs().flatten(1).amax(dim=1) > 1e-6
    assert abs(changed.float().mean().item() - 0.5) < 0.08
    assert torch.equal(out, gaussian_blur(x, sigma=(0.1, 2.0), p=0.5, generator=_gen(3)))
    tiny = gaussian_blur(x, sigma=(0.1, 0.1), p=1.0, generator=_gen())
    assert torch.allclose(tiny, x, atol=1e-4)  # sigma 0.1 px: neighbour weight ~ e^-50


def test_image_augmenter_applies_the_options() -> None:
    spec = PartySpec("image", (1, 10, 12))
    x = _images(n=8, channels=1)
    plain = make_augmenter(spec, x, crop_scale=(1.0, 1.0), flip=False)
    assert torch.allclose(plain(x, _gen()), x, atol=1e-6)
    full = make_augmenter(spec, x, crop_scale=(1.0, 1.0), flip=False, jitter=(0.3, 0.3, 0.3, 0.1), jitter_p=1.0,
                          blur_sigma=(0.1, 2.0), blur_p=1.0)
    assert not torch.allclose(full(x, _gen()), x, atol=1e-3)


@pytest.mark.parametrize("bad", [{"color_jitter": [-0.1, 0, 0, 0]}, {"color_jitter": [0, 0, 0, 0.6]},
                                 {"blur_sigma": [0, 2]}, {"blur_sigma": [2, 1]}, {"crop_scale": [0, 1]},
                                 {"crop_scale": [0.5, 1.5]}, {"jitter_p": 1.5}])
def test_view_options_are_checked_when_parsed(bad: dict) -> None:
    with pytest.raises(ValueError):
        HybridOptions.model_validate(bad)
