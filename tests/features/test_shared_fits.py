"""Fits shared across the feature attacks of one training: fi-inversion reuses fi-decoder's decoder, and a reused fit
gives the numbers a fresh one gives (the stream left where the fit left it); a tampered stored fit is refitted."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from feature_helpers import linear_view
from vflpriv.attacks.features import decoder_attack, shared_fits
from vflpriv.attacks.features.decoder_attack import DecoderOptions, FeatureDecoder
from vflpriv.attacks.features.inversion import FeatureInversion, InversionOptions

SMALL = InversionOptions(steps=5, surrogate_epochs=3, decoder_epochs=4)


@pytest.fixture
def decoder_fits(monkeypatch):
    """The decoder fits really made (not reused), counted; an empty store of fits."""
    monkeypatch.setattr(shared_fits, "_FITS", type(shared_fits._FITS)())
    made = []
    fit = decoder_attack.fit_regression

    @functools.wraps(fit)
    def counted(*args, **kwargs):
        made.append(kwargs["what"])
        return fit(*args, **kwargs)

    monkeypatch.setattr(decoder_attack, "fit_regression", counted)
    return made


def _view():
    return linear_view(n_aux=64, n_test=32)[0]  # a fresh view and stream at each call


def test_fi_inversion_reuses_fi_decoder_s_decoder_and_gives_a_fresh_run_s_numbers(decoder_fits):
    fresh = FeatureInversion(SMALL).infer(_view())
    shared_fits._FITS.clear()
    FeatureDecoder(DecoderOptions(epochs=4)).infer(_view())
    assert len(decoder_fits) == 2
    reused = FeatureInversion(SMALL).infer(_view())
    assert len(decoder_fits) == 2  # the decoder was not trained again
    for name in ("train", "test"):
        assert torch.equal(reused[name].features, fresh[name].features)


def test_a_fit_with_other_inputs_or_another_recipe_is_not_reused(decoder_fits):
    FeatureDecoder(DecoderOptions(epochs=4)).infer(_view())
    view = _view()
    FeatureDecoder(DecoderOptions(epochs=4)).infer(dataclasses.replace(view, aux_victim=view.aux_victim.flip(0)))
    FeatureDecoder(DecoderOptions(epochs=4, lr=2e-3)).infer(_view())
    assert len(decoder_fits) == 3
    FeatureDecoder(DecoderOptions(epochs=4)).infer(_view())
    assert len(decoder_fits) == 3


def test_a_tampered_stored_fit_is_refitted(decoder_fits):
    fresh = FeatureDecoder(DecoderOptions(epochs=4)).infer(_view())["test"].features
    (stored,) = shared_fits._FITS.values()
    next(iter(stored.state.values())).add_(1.0)
    again = FeatureDecoder(DecoderOptions(epochs=4)).infer(_view())["test"].features
    assert len(decoder_fits) == 2
    assert torch.equal(again, fresh)


@pytest.mark.parametrize("damage", ["swapped", "truncated", "stream"])
def test_a_swapped_truncated_or_restreamed_stored_fit_is_refitted_and_gives_a_cold_run_s_numbers(decoder_fits, damage):
    """Each stored fit is verified as the fit of its own key: another key's weights (a swap), a state missing a
    tensor, or a stream position not the one its fit left are refitted, never loaded."""
    view = _view
    cold = FeatureInversion(SMALL).infer(view())
    shared_fits._FITS.clear()
    FeatureDecoder(DecoderOptions(epochs=4)).infer(view())  # the decoder fi-inversion will look up
    FeatureDecoder(DecoderOptions(epochs=4, lr=2e-3)).infer(view())  # another key's decoder, of the same shapes
    mine, other = list(shared_fits._FITS)
    fits = shared_fits._FITS
    if damage == "swapped":
        fits[mine] = fits[other]
    elif damage == "truncated":
        fits[mine] = dataclasses.replace(fits[mine], state=dict(list(fits[mine].state.items())[:-1]))
    else:
        fits[mine] = dataclasses.replace(fits[mine], stream_after=torch.Generator().manual_seed(123).get_state())
    made = len(decoder_fits)
    again = FeatureInversion(SMALL).infer(view())
    assert decoder_fits[made:].count("fi-decoder's decoder") == 1  # refitted
    for name in ("train", "test"):
        assert torch.equal(again[name].features, cold[name].features)


def test_a_network_with_batchnorm_is_keyed_by_its_whole_state():
    """A decoder with BatchNorm holds a 0-dim counter (``num_batches_tracked``) in its state: the key reads it (a view
    of a 0-dim tensor as bytes failed, so the conv decoder's fit crashed) and tells two states apart."""
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    stream = torch.Generator().get_state()
    before = shared_fits._fit_digest("key", net.state_dict(), stream)
    net.train()(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)))
    assert shared_fits._fit_digest("key", net.state_dict(), stream) != before
