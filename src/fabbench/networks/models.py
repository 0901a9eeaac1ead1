"""Models by name. A spec says what input the model takes (images or tokens) and how to build
it; building imports torch (lazily), the spec does not."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from fabbench.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    family: str  # "image" (N, 3, H, W) -> class scores, or "tokens" (N, T) -> next-token logits
    builder: str  # "module:function", called with **kwargs
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    default_input: int = 224  # image side in pixels, or sequence length in tokens
    input_multiple: int = 32  # an image side must be a multiple of this (the total stride)
    min_input: int = 32
    max_input: int | None = None  # a transformer's context length
    reference_parameters: int | None = None  # the published count (docs/methods.md)
    batchnorm: bool = False  # needs more than one value per channel in training


    def check_input(self, size: int) -> None:
        what = "image size" if self.family == "image" else "sequence length"
        if size < self.min_input:
            raise UsageError(f"{what} {size} is too small for {self.name} (at least "
                             f"{self.min_input})")
        if size % self.input_multiple:
            raise UsageError(f"{what} {size} does not suit {self.name}: it must be a multiple of "
                             f"{self.input_multiple}")
        if self.max_input is not None and size > self.max_input:
            raise UsageError(f"{what} {size} is longer than {self.name}'s context of "
                             f"{self.max_input}")


class _Registry(dict[str, ModelSpec]):
    def add(self, spec: ModelSpec) -> None:
        if spec.name in self:
            raise ValueError(f"model {spec.name!r} is registered twice")
        self[spec.name] = spec


MODELS: _Registry = _Registry()
for _spec in (
    ModelSpec(name="resnet50", family="image", builder="fabbench.networks.resnet:resnet50",
              batchnorm=True,
              description="ResNet-50 (He et al. 2016, torchvision layout, ImageNet head)",
              reference_parameters=25_557_032),
    ModelSpec(name="resnet101", family="image", builder="fabbench.networks.resnet:resnet101",
              batchnorm=True,
              description="ResNet-101 (ImageNet head)", reference_parameters=44_549_160),
    ModelSpec(name="vgg16", family="image", builder="fabbench.networks.vgg:vgg16",
              description="VGG-16 without batch norm (ImageNet head)",
              reference_parameters=138_357_544),
    ModelSpec(name="gpt-tiny", family="tokens", builder="fabbench.networks.gpt:gpt",
              kwargs={"layers": 2, "width": 128, "heads": 4, "vocab": 4096, "context": 256},
              description="GPT-style decoder, 2 layers x 128 (tests, smoke runs)",
              default_input=128, input_multiple=1, min_input=1, max_input=256),
    ModelSpec(name="gpt-small", family="tokens", builder="fabbench.networks.gpt:gpt",
              kwargs={"layers": 12, "width": 768, "heads": 12, "vocab": 50257, "context": 1024},
              description="GPT-2 small shape: 12 layers x 768, tied embeddings",
              reference_parameters=124_439_808,
              default_input=1024, input_multiple=1, min_input=1, max_input=1024),
    ModelSpec(name="gpt-medium", family="tokens", builder="fabbench.networks.gpt:gpt",
              kwargs={"layers": 24, "width": 1024, "heads": 16, "vocab": 50257, "context": 1024},
              description="GPT-2 medium shape: 24 layers x 1024, tied embeddings",
              reference_parameters=354_823_168,
              default_input=1024, input_multiple=1, min_input=1, max_input=1024),
):
    MODELS.add(_spec)


def get(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r} (known: {', '.join(MODELS)})") from None


def build(name: str, **overrides: Any) -> Any:
    """A fresh ``torch.nn.Module`` (on the current default device, e.g. under
    ``torch.device("meta")`` to count parameters without allocating them)."""
    spec = get(name)
    module, _, function = spec.builder.partition(":")
    return getattr(importlib.import_module(module), function)(**{**spec.kwargs, **overrides})


def parameter_count(name: str) -> int:
    """Trainable parameters, counted on the meta device (no memory is allocated)."""
    import torch

    with torch.device("meta"):
        model = build(name)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
