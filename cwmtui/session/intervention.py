"""What the user did to start a branch: one small typed record, saved as a JSON object."""

from __future__ import annotations

from dataclasses import dataclass

#: the kinds of intervention: the action replaced, the state edited, both, the interpreter's whole
#: frame forced at one step (its event, state and line), every action forced (the model writes the
#: states), or every frame forced (the model predicts each next frame from the interpreter's trace
#: so far)
KINDS = ("action", "locals", "action+locals", "frame", "teacher_force", "teacher_force_frames")
#: where a replaced action came from
SOURCES = ("truth", "line", "typed")


@dataclass(frozen=True)
class Intervention:
    kind: str  # one of KINDS
    step: int  # the model frame it replaced
    source: str | None = None  # one of SOURCES for a replaced action
    action: str | None = None  # the line forced
    locals: dict[str, str] | None = None  # the state forced
    forced_frame: bool = False  # the real line came with the truth's whole frame (the model's event was wrong)

    @property
    def teacher_forced(self) -> bool:
        """A teacher-forced condition (actions or whole frames): no single step was changed."""
        return self.kind in ("teacher_force", "teacher_force_frames")

    @property
    def whole_frames(self) -> bool:
        return self.kind == "teacher_force_frames"

    @property
    def by_user(self) -> bool:
        """The user's own line or state (not the interpreter's): never the model's doing."""
        return self.kind in ("locals", "action+locals") or self.source in ("line", "typed")

    def describe(self) -> str:
        """For people: ``action overridden at step 5 with the real line``."""
        if self.whole_frames:
            return "every frame from the interpreter: the model predicts one step at a time"
        if self.teacher_forced:
            return "every action forced from the interpreter"
        if self.kind == "frame":
            return f"the interpreter's whole frame forced at step {self.step}"
        what = {"action": "action", "locals": "state", "action+locals": "action and state"}[self.kind]
        text = f"{what} overridden at step {self.step}"
        source = {"truth": "the real line", "line": "another line", "typed": "a typed line"}.get(self.source or "", "")
        return text + (f" with {source}" if source and "action" in self.kind else "")

    def to_json(self) -> dict:
        data: dict = {"kind": self.kind, "step": self.step, "source": self.source}
        if self.action is not None:
            data["action"] = self.action
        if self.locals is not None:
            data["locals"] = dict(self.locals)
        if self.forced_frame:
            data["forced_frame"] = True
        return data

    @classmethod
    def from_json(cls, data) -> "Intervention":
        """The intervention a session file saved; TypeError or ValueError naming what is wrong
        (a damaged file)."""
        if not isinstance(data, dict):
            raise TypeError("a branch's intervention must be an object")
        kind, step, source = data.get("kind"), data.get("step", 0), data.get("source")
        action, values = data.get("action"), data.get("locals")
        if kind not in KINDS:
            raise ValueError(f"unknown intervention kind {kind!r}")
        if type(step) is not int or step < 0:
            raise TypeError("an intervention's step must be a whole number")
        if source is not None and source not in SOURCES:
            raise ValueError(f"unknown intervention source {source!r}")
        if action is not None and not isinstance(action, str):
            raise TypeError("an intervention's action must be text")
        if values is not None and not (isinstance(values, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())):
            raise TypeError("an intervention's locals must map names to text")
        return cls(kind, step, source, action, dict(values) if values is not None else None, bool(data.get("forced_frame")))
