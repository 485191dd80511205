"""Independent numpy reference ("oracle") for the WASTE v0 container format
and the Kimi-Linear / K3 / DeepSeek-V3-family forward pass.

Written from /work/shared/spec/FORMAT.md and MODEL.md only.
"""

from .checkpoint import Checkpoint  # noqa: F401
from .container import Container, FormatError  # noqa: F401
from .forward import Model  # noqa: F401
