"""World models: backends and the rollout engine.

``backend`` holds the protocol (:class:`Backend`, :class:`Completion`, :class:`ModelError`),
``opening`` opens one (the bundled model, a directory, a server, a replay); ``hf`` the
transformers backend, ``lean`` the bundled model without transformers, ``server`` the vLLM /
fgserve client, ``replay`` recorded generations, ``rollout`` the frame-by-frame engine. The
command-line options that pick a model live in :mod:`cwmtui.cli.model_options`. Importing this
package does not import torch.
"""

from ..trace.rollout_status import RolloutStatus
from .backend import REPLAY_OVERRIDE, Backend, Completion, ModelError
from .opening import bundled_problem, open_backend
from .replay import ReplayBackend, ReplayRecord, load_replay, replay_rollout
from .rollout import Rollout, RolloutOptions

__all__ = [
    "REPLAY_OVERRIDE",
    "Backend",
    "Completion",
    "ModelError",
    "bundled_problem",
    "open_backend",
    "ReplayBackend",
    "ReplayRecord",
    "load_replay",
    "replay_rollout",
    "Rollout",
    "RolloutOptions",
    "RolloutStatus",
]
