"""Models defined with plain torch (no torchvision), looked up by name in one explicit registry.

The registry itself imports nothing heavy: a spec names its builder as ``module:function`` and
torch is imported only when a model is built.
"""

from fabbench.networks.models import MODELS, ModelSpec, build, get, parameter_count

__all__ = ["MODELS", "ModelSpec", "build", "get", "parameter_count"]
