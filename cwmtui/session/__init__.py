"""One debugging session: a program, its truth, the model's rollouts as a tree of branches.

``DebugSession(program, backend, options)`` records the program under the real interpreter
(the truth), runs the model's main rollout, and grows branches from interventions: at step
``k`` the model's action is replaced (by the real next line, another source line, or a typed
one) or its locals are edited, and the model goes on from there. Each branch is compared with
the truth and, for an intervention, scored for recovery. The teacher-forced branch forces every
action from the truth.

A session saves to one JSON file (program, truth, branches with their frames, interventions and
comparisons, settings, model identity) and reopens offline, without a model, with the same
comparisons. Format version 2 keeps what reopening would otherwise work out again: each
branch's comparison in compact form (``Comparison.to_saved``: rows as runs, the names each
frame changed, the first divergence; the recovery), frames as rows, and a model's frames equal
to the interpreter's as runs referring to them (``cwmtui/trace/stored.py``). It is read with
orjson, checked whole, and frames and rows are built only as they are shown, so a
100,000-step session opens in well under a second. Version 1 files (frames as objects, no
saved comparisons) still open: their branches are compared again. Reopened with a backend, a
session grows new branches like a live one. Long operations take ``on_frame`` and ``cancel``
(a callable or an Event) so a UI can run them in a worker thread and stream frames. Pure
Python: no UI here.
"""

from .branch import Branch, BranchState
from .debug import DebugSession, FrameCallback
from .errors import SessionError
from .intervention import Intervention
from .saved import FORMAT, FORMAT_VERSION

__all__ = ["Branch", "BranchState", "DebugSession", "FrameCallback", "SessionError", "Intervention", "FORMAT", "FORMAT_VERSION"]
