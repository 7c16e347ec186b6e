"""FedPass: private passports in the active party's model (Gu et al., "FedPass: Privacy-Preserving Vertical Federated
Deep Learning with Adaptive Obfuscation", 2023, Alg. 2; SecretFlow ``sl/defenses/fed_pass.py`` ``LinearPassportBlock``,
from FATE 2.0's HeteroNN).

Each received passive embedding z (width d) passes, inside the active party's model, through a passport layer the
active party owns and trains: x = W2 W1 z (hidden width ``hidden``), then tanh(gamma) * x + tanh(beta), where the
scale gamma and the bias beta come from two private passport keys, s and b, drawn once per party from
N(``loc``, sigma^2), each ``key_rows`` x d: gamma = AE(mean over the key's rows of W2 W1 s) with AE a small bottleneck
autoencoder (d -> d / 4 -> d, LeakyReLU, no bias), and beta likewise from b. ``key_rows`` is 1 by default, the anchors'
default (SecretFlow's and FATE's ``num_passport=1``: ``generate_key`` replaces the batch dimension by it); more rows
average the key before it reaches gamma, so a key of 64 rows is about 8x less random than the anchors'. The keys never
leave the active party, so the passive party, and the top it trains against, see an obfuscation it cannot undo; the
gradient it receives is taken through the passported layer. Strength: sigma, the keys' scale (the passport's randomness; higher is
stronger); 0 is the identity (no passport layer). The paper's "passports on passive bottoms" variant protects
features, not labels, and is not built here.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from vflpriv.config.options import Options
from vflpriv.defenses.base import ACTIVE_MODEL, StrengthAxis, TrainingDefense
from vflpriv.models.encoders import init_parameters


class FedPassOptions(Options):
    hidden: int = Field(128, ge=1, le=4096, description="width of the passport layer's first Linear (SecretFlow: 128)")
    loc: float = Field(-1.0, description="mean of the passport keys' normal distribution (SecretFlow: -1)")
    key_rows: int = Field(1, ge=1, le=4096, description="rows of each passport key, averaged through the layer "
                          "(SecretFlow's and FATE's num_passport: 1)")


class PassportLayer(nn.Module):
    """A Linear-Linear layer whose output is scaled and shifted by what its private keys give through it."""

    def __init__(self, width: int, *, hidden: int, scale_key: torch.Tensor, bias_key: torch.Tensor):
        super().__init__()
        self.linear = nn.Sequential(nn.Linear(width, hidden), nn.Linear(hidden, width))
        inner = max(1, width // 4)
        self.autoencoder = nn.Sequential(nn.Linear(width, inner, bias=False), nn.LeakyReLU(),
                                         nn.Linear(inner, width, bias=False))
        self.register_buffer("scale_key", scale_key)
        self.register_buffer("bias_key", bias_key)

    def _key(self, key: torch.Tensor) -> torch.Tensor:
        return self.autoencoder(self.linear(key).mean(0, keepdim=True))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self._key(self.scale_key)) * self.linear(z) + torch.tanh(self._key(self.bias_key))


class FedPass(TrainingDefense):
    """A passport layer with private keys over each received embedding, in the active party's model."""

    Options = FedPassOptions
    hook_points = frozenset({ACTIVE_MODEL})
    axis = StrengthAxis(name="sigma", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.1, 100.0), log=True)
    audit_strengths = {"finetune": (1.0, 10.0, 50.0)}
    anchor = "Gu et al. 2023 (FedPass); SecretFlow fed_pass.py LinearPassportBlock; FATE 2.0 HeteroNN"
    #: 1: the default key is one row, the anchors' (0's 64 rows averaged the key 8x less random; its records do not
    #: resume).
    revision = 1

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.layers: dict[int, PassportLayer] = {}

    def _layer(self, party: int, z: torch.Tensor) -> PassportLayer:
        if party not in self.layers:
            o, width = self.options, z.shape[1]
            keys = [o.loc + self.strength * torch.randn((o.key_rows, width), generator=self.generator,
                                                        device=self.generator.device) for _ in range(2)]
            layer = PassportLayer(width, hidden=o.hidden, scale_key=keys[0], bias_key=keys[1])
            self.layers[party] = init_parameters(layer, generator=self.generator).to(z.device)
        return self.layers[party]

    def receive(self, party: int, embedding: torch.Tensor) -> torch.Tensor:
        if self.is_identity:
            return embedding
        z = embedding.flatten(1)
        return self._layer(party, z)(z).reshape(embedding.shape)

    def active_parameters(self) -> list[nn.Parameter]:
        return [p for m in self.layers.values() for p in m.parameters()]
