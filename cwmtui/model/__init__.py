"""World models: backends and the rollout engine.

``backend`` holds the protocol (:class:`Backend`, :class:`Completion`, :class:`ModelError`) and
the shared command-line options; ``hf`` the transformers backend, ``server`` the vLLM / fgserve
client, ``replay`` recorded generations, ``rollout`` the frame-by-frame engine. Importing this
package does not import torch.
"""

from .backend import (
    REPLAY_OVERRIDE,
    Backend,
    Completion,
    ModelError,
    add_model_options,
    backend_from_args,
    bundled_problem,
    open_backend,
)
from .replay import ReplayBackend, ReplayRecord, load_replay, replay_rollout
from .rollout import Rollout, RolloutOptions, RolloutStatus, rollout_options_from_args

__all__ = [
    "REPLAY_OVERRIDE",
    "Backend",
    "Completion",
    "ModelError",
    "add_model_options",
    "backend_from_args",
    "bundled_problem",
    "open_backend",
    "ReplayBackend",
    "ReplayRecord",
    "load_replay",
    "replay_rollout",
    "Rollout",
    "RolloutOptions",
    "RolloutStatus",
    "rollout_options_from_args",
]
