"""A traced program as a training document: byte ids and the span the loss covers.

The document is ``prompt_segments(source) + frames_segments(frames, end=True)``: the entry CALL
frame is part of the prompt (the rollout forces it from the truth), so the loss covers the
frames after it and the final ``<|end_of_text|>``. Text is mapped to byte ids directly
(``byte + 3``), which gives the same ids as the tokenizer with ``add_special_tokens=False,
split_special_tokens=True`` (a test checks), and special segments to their ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trace import Special, frames_segments, prompt_segments, tokens
from ..trace.frame import Frame

from ..model.byte_tokenizer import BYTE_OFFSET, EOS_ID, PAD_ID, SPECIAL_IDS, VOCAB_USED  # noqa: F401 (re-exported)


def encode_segments(segments) -> list[int]:
    ids: list[int] = []
    for seg in segments:
        if isinstance(seg, Special):
            ids.append(SPECIAL_IDS[str(seg)])
        else:
            ids.extend(b + BYTE_OFFSET for b in seg.encode("utf-8"))
    return ids


def decode_ids(ids) -> str:
    """Text of ids: bytes decoded as UTF-8 (with replacement), specials as their strings."""
    names = {v: k for k, v in SPECIAL_IDS.items()}
    out: list[str] = []
    buf = bytearray()
    for i in ids:
        i = int(i)
        if BYTE_OFFSET <= i < BYTE_OFFSET + 256:
            buf.append(i - BYTE_OFFSET)
            continue
        if buf:
            out.append(buf.decode("utf-8", "replace"))
            buf = bytearray()
        out.append(names.get(i, ""))
    if buf:
        out.append(buf.decode("utf-8", "replace"))
    return "".join(out)


@dataclass
class Document:
    ids: list[int]
    loss_start: int  # index of the first token the loss covers (first token after the entry frame)
    family: str = ""
    frame_starts: list[int] | None = None  # token index where each frame after the entry starts

    def __len__(self) -> int:
        return len(self.ids)


def document(source: str, frames: list[Frame], end: bool = True, family: str = "") -> Document:
    """Prompt + entry frame (no loss) + the remaining frames and end of text (loss)."""
    prompt = encode_segments(prompt_segments(source))
    segs = frames_segments(frames, end=end)
    ids = list(prompt)
    starts: list[int] = []
    loss_start = None
    for seg in segs:
        if isinstance(seg, Special) and str(seg) in (tokens.CALL_SEP, tokens.LINE_SEP, tokens.RETURN_SEP, tokens.EXCEPTION_SEP, tokens.END_OF_TEXT):
            starts.append(len(ids))
        if isinstance(seg, Special):
            ids.append(SPECIAL_IDS[str(seg)])
        else:
            ids.extend(b + BYTE_OFFSET for b in seg.encode("utf-8"))
    # frame 0 is the entry CALL frame: the loss starts at the next frame
    loss_start = starts[1] if len(starts) > 1 else len(ids)
    return Document(ids, loss_start, family, starts[1:])
