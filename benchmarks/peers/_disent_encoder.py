"""disentanglement_lib's conv encoder with our layer sizes, as a disent ``DisentEncoder``.

Layers: conv 4x4/2 pad 1 to 32 channels, the same to 32, conv 2x2/2 to 64, the same to 64, each
with a ReLU; dense 1,024 -> 256 with a ReLU; one dense 256 -> 2 x z_size layer (means and
log-variances side by side, as disent's encoders output them). The class lives in a module of its
own so that Lightning can pickle it into its checkpoints. Import it after
``_disent_setup.import_torchvision()``: disent imports torchvision through Lightning.
"""
from __future__ import annotations

from disent.model import DisentEncoder
from torch import nn


class EncoderConv64Ours(DisentEncoder):
    def __init__(self, x_shape=(1, 64, 64), z_size=10, z_multiplier=2):
        super().__init__(x_shape=x_shape, z_size=z_size, z_multiplier=z_multiplier)
        channels = x_shape[0]
        self.model = nn.Sequential(
            nn.Conv2d(channels, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, kernel_size=2, stride=2), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, kernel_size=2, stride=2), nn.ReLU(inplace=True),
            nn.Flatten(),
            nn.Linear(1024, 256), nn.ReLU(inplace=True),
            nn.Linear(256, self.z_total),
        )

    def encode(self, x):
        return self.model(x)
