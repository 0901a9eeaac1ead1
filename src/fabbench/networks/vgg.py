"""VGG-16 (configuration D, no batch norm) in plain torch. The adaptive 7x7 pooling keeps the
ImageNet classifier (and so the reference parameter count) for any image side that is a multiple
of 32."""

from __future__ import annotations

from torch import Tensor, nn

CONFIG_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
            512, 512, 512, "M")


class VGG(nn.Module):
    def __init__(self, config: tuple[int | str, ...] = CONFIG_D, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for v in config:
            if isinstance(v, str):  # "M": a max pool
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(in_ch, v, 3, padding=1), nn.ReLU(inplace=True)]
                in_ch = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(in_ch * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(),
            nn.Linear(4096, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        logits: Tensor = self.classifier(self.avgpool(self.features(x)).flatten(1))  # Any
        return logits


def vgg16(num_classes: int = 1000) -> VGG:
    return VGG(CONFIG_D, num_classes)
