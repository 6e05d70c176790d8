"""Replay: recorded generations (a batch run on a GPU cluster) opened as if a model wrote them.

A replay file has one JSON object per line::

    {"id": ..., "program": SOURCE, "generation": CWM_TEXT}
    {"id": ..., "code": CODE, "input": INPUT, "generation": CWM_TEXT}   # the CRUXEval wrapper

``generation`` is CWM token text as dumps store it. Two start conventions are accepted:
ASSERT-KTH style dumps start right after the seeded entry call frame
(``<|call_sep|>{}<|action_sep|>def main():\\n<|frame_sep|>``, which the harness put in the
prompt), others start with the entry call frame itself. A generation may also carry the whole
prompt in front (``<|begin_of_text|><|trace_context_start|>...<|frame_sep|>``); the context then
stands in for a missing program. An optional ``"call"`` gives the expression that runs the entry.

A :class:`ReplayBackend` serves the recorded tokens to a :class:`Rollout` exactly as a live
backend would serve generated ones, so the rollout's frames are the recorded frames. Overrides
are impossible: there is no model to ask what would have happened.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Sequence

from ..interpreter.program import Program, ProgramError, cruxeval_program, program_from_source
from ..json_lines import read_json_lines
from ..trace import tokens
from ..trace.frame import Event, Frame
from ..trace.parser import split_text
from ..trace.render import Compressor, frame_segments, prompt_segments
from .backend import REPLAY_OVERRIDE, Backend, Completion, ModelError
from .tokenizer import HFTokenizer, byte_tokenizer, load_any_tokenizer


@dataclass
class ReplayRecord:
    id: str
    program: Program
    generation: str  # the recorded frames in CWM text (any prompt in front removed)
    seeded: bool  # the recording starts after a seeded entry call frame (ASSERT-KTH style)
    line: int = 0  # line of the replay file (1-based)

    @property
    def seed_frame(self) -> Frame | None:
        """The entry call frame the harness seeded, when the recording starts after one."""
        if not self.seeded:
            return None
        program = self.program
        lineno = program.entry_firstlineno
        action = tokens.strip_marker(program.lines[lineno - 1])
        return Frame(Event.CALL, action, {}, None, lineno, 0, program.entry)


def split_prompt(text: str) -> tuple[str | None, str]:
    """``(context, frames text)``: a generation with the prompt in front gives its context."""
    rest = text
    if rest.startswith(tokens.BEGIN_OF_TEXT):
        rest = rest[len(tokens.BEGIN_OF_TEXT) :]
    if not rest.startswith(tokens.TRACE_CONTEXT_START):
        return None, text
    rest = rest[len(tokens.TRACE_CONTEXT_START) :]
    context, sep, frames = rest.partition(tokens.FRAME_SEP)
    if not sep:
        return context, ""
    return context, frames


def starts_after_seed(text: str) -> bool:
    """Does a recorded generation (frames text, no prompt) start after a seeded entry call frame
    (ASSERT-KTH style)? It does when it starts with anything but an entry call frame; an empty
    generation does not: the model wrote nothing, so nothing of its trace is there, seeded or not."""
    return bool(text) and not text.startswith(tokens.CALL_SEP)


def record_from(data: dict, where: str, line: int = 0) -> ReplayRecord:
    """One replay record from its JSON object; ModelError naming ``where`` if it is unusable."""
    if not isinstance(data, dict):
        raise ModelError(f"{where}: not a JSON object")
    generation = data.get("generation")
    if not isinstance(generation, str):
        raise ModelError(f"{where}: no 'generation' text")
    try:
        generation.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate escape (\\ud800): no model writes that
        raise ModelError(f"{where}: the generation is not valid Unicode (character {exc.start} is a lone surrogate)") from None
    record_id = data.get("id", line)
    if isinstance(record_id, (dict, list)):
        raise ModelError(f"{where}: 'id' must be text or a number")
    record_id = str(record_id)
    call = data.get("call")
    if call is not None and not isinstance(call, str):
        raise ModelError(f"{where}: 'call' must be text (the Python expression that calls the entry)")
    context, text = split_prompt(generation)
    name = f"<replay {record_id}>"
    try:
        if isinstance(data.get("program"), str):
            program = _program(data["program"], name, call)
        elif isinstance(data.get("code"), str) and data.get("input") is not None:
            program = cruxeval_program(data["code"], str(data["input"]), path=name)
        elif context is not None:
            program = _program(context, name, call)
        else:
            raise ModelError(f"{where}: no program: needs 'program', or 'code' and 'input'")
    except ProgramError as exc:
        raise ModelError(f"{where}: {exc}") from None
    return ReplayRecord(record_id, program, text, starts_after_seed(text), line)


def _program(source: str, name: str, call: str | None) -> Program:
    program = program_from_source(source, name, call=call)
    if program.call is None and _takes_no_arguments(program):
        # e.g. a CRUXEval-style "def main():  # << START_OF_TRACE" wrapper that nothing calls
        program = program_from_source(program.source, name, call=f"{program.entry}()")
    return program


def _takes_no_arguments(program: Program) -> bool:
    tree = ast.parse(program.source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == program.entry_line:
            args = node.args
            required = len(args.posonlyargs) + len(args.args) - len(args.defaults)
            required += sum(1 for d in args.kw_defaults if d is None)
            return required == 0 and not isinstance(node, ast.AsyncFunctionDef)
    return False


def read_replay(path: str) -> list[tuple[int, dict]]:
    """The JSON objects of a replay file with their line numbers."""
    objects = read_json_lines(path, "replay file", ModelError)
    if not objects:
        raise ModelError(f"{path}: holds no generations")
    return objects


def load_replay(path: str) -> list[ReplayRecord]:
    """Every record of a replay file (for batch triage)."""
    return [record_from(data, f"{path}:{number}", number) for number, data in read_replay(path)]


class ReplayBackend(Backend):
    """Serves one recorded generation token by token; it cannot generate anything else."""

    can_generate = False

    def __init__(self, record: ReplayRecord, tokenizer: HFTokenizer | None = None, source: str = "") -> None:
        self.record = record
        self.program = record.program
        self._tokens = tokenizer or byte_tokenizer()
        self.special_ids = self._tokens.special_ids
        seed = record.seed_frame
        self.seed_frames = [seed] if seed is not None else []
        prompt = self.encode_segments(prompt_segments(record.program.source))
        compressor = Compressor()
        seeded = [i for frame in self.seed_frames for i in self.encode_segments(frame_segments(frame, compressor))]
        self._prompt_len = len(prompt)
        self._ids = prompt + seeded + self.encode_segments(split_text(record.generation))
        self._eos = self.special_ids[tokens.END_OF_TEXT]
        self._checked = 0  # the prompt's ids up to here were checked against the recording
        label = os.path.basename(source) if source else "replay"
        counted = "byte counts" if tokenizer is None else f"tokens of {tokenizer.where}"
        self.name = f"replay {source or '-'}#{record.id}"
        self.description = f"replay of {record.id} from {label} · recorded generation · {counted}"

    @classmethod
    def open(cls, path: str, replay_id: str | None = None, tokenizer: str | None = None) -> "ReplayBackend":
        objects = read_replay(path)
        if replay_id is None:
            if len(objects) > 1:
                ids = ", ".join(str(data.get("id", number)) for number, data in objects[:3])
                raise ModelError(f"{path} holds {len(objects)} generations: pass --id ID (e.g. {ids}, ...)")
            number, data = objects[0]
        else:
            found = [(n, d) for n, d in objects if str(d.get("id", n)) == str(replay_id)]
            if not found:
                ids = ", ".join(str(d.get("id", n)) for n, d in objects[:5])
                more = ", ..." if len(objects) > 5 else ""
                raise ModelError(f"{path}: no generation with id {replay_id!r} (ids: {ids}{more})")
            number, data = found[0]
        record = record_from(data, f"{path}:{number}", number)
        return cls(record, load_any_tokenizer(tokenizer) if tokenizer else None, source=path)

    def encode(self, text: str) -> list[int]:
        return self._tokens.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokens.decode(ids)

    def complete(self, prompt_ids, stop_ids, max_new_tokens, temperature=0.0, top_p=1.0, seed=None, cancel=None, constraint=None) -> Completion:
        recorded = self._ids
        n = len(prompt_ids)
        if n > len(recorded):
            raise ModelError(REPLAY_OVERRIDE)
        if self._checked < self._prompt_len or n < self._prompt_len:
            if list(prompt_ids[: self._prompt_len]) != recorded[: self._prompt_len]:
                raise ModelError(f"replay {self.record.id}: this generation was recorded for another program")
            self._checked = self._prompt_len
        # A rollout only appends to its prompt and cuts it back (a replay takes no overrides), so
        # what was checked before stays checked: each call checks what is new, and a whole replay
        # is linear in its length. Only a cut-back prompt is checked again from where it ends.
        start = min(self._checked, n)
        if start and prompt_ids[start - 1] != recorded[start - 1]:
            start = self._prompt_len
        if list(prompt_ids[start:n]) != recorded[start:n]:
            raise ModelError(REPLAY_OVERRIDE)
        self._checked = n
        stops = set(stop_ids)
        out: list[int] = []
        for index in range(n, min(n + max_new_tokens, len(recorded))):  # (a slice would copy the rest)
            token = recorded[index]
            out.append(token)
            if token == self._eos:
                return Completion(out, 0, "eos")
            if token in stops:
                return Completion(out, 0, "stop")
        return Completion(out, 0, "length" if len(out) == max_new_tokens else "end")


def replay_rollout(program: Program, generation_text: str, tokenizer: HFTokenizer | None = None):
    """A finished Rollout whose frames are those of ``generation_text`` (either convention, with
    or without the prompt in front)."""
    from .rollout import Rollout

    _context, text = split_prompt(generation_text)
    record = ReplayRecord("generation", program, text, starts_after_seed(text))
    rollout = Rollout(ReplayBackend(record, tokenizer), program, None)
    rollout.run()
    return rollout
