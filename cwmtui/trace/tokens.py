"""The CWM special tokens (spec §1.1) and the START_OF_TRACE marker (spec §2)."""

BEGIN_OF_TEXT = "<|begin_of_text|>"
END_OF_TEXT = "<|end_of_text|>"
PAD = "<|pad|>"
FRAME_SEP = "<|frame_sep|>"
ACTION_SEP = "<|action_sep|>"
RETURN_SEP = "<|return_sep|>"
CALL_SEP = "<|call_sep|>"
LINE_SEP = "<|line_sep|>"
EXCEPTION_SEP = "<|exception_sep|>"
ARG_SEP = "<|arg_sep|>"
TRACE_CONTEXT_START = "<|trace_context_start|>"

#: Every special token a trace uses, in the order of their ids in Meta's tokenizer.
TRACE_TOKENS = (
    FRAME_SEP,
    ACTION_SEP,
    RETURN_SEP,
    CALL_SEP,
    LINE_SEP,
    EXCEPTION_SEP,
    ARG_SEP,
    TRACE_CONTEXT_START,
)
SPECIAL_TOKENS = (BEGIN_OF_TEXT, END_OF_TEXT) + TRACE_TOKENS

#: Meta's ids (128000 + offset), for reference and for servers that serve the real model.
CWM_IDS = {
    BEGIN_OF_TEXT: 128000,
    END_OF_TEXT: 128001,
    PAD: 128004,
    FRAME_SEP: 128100,
    ACTION_SEP: 128101,
    RETURN_SEP: 128102,
    CALL_SEP: 128103,
    LINE_SEP: 128104,
    EXCEPTION_SEP: 128105,
    ARG_SEP: 128106,
    TRACE_CONTEXT_START: 128107,
}

#: The canonical marker appended to the entry function's def line (two spaces, as cwmdbg).
START_MARKER = "  # << START_OF_TRACE"
_MARKER_BODY = "# << START_OF_TRACE"


def strip_marker(line: str) -> str:
    """Remove a trailing START_OF_TRACE comment from a source line (a suffix removal).

    Accepts any whitespace before the comment (the paper's Fig. 5 uses one space) and keeps the
    line's final newline.
    """
    newline = "\n" if line.endswith("\n") else ""
    body = line[: len(line) - len(newline)]
    stripped = body.rstrip()
    if stripped.endswith(_MARKER_BODY):
        return stripped[: -len(_MARKER_BODY)].rstrip() + newline
    return line


def has_marker(line: str) -> bool:
    return line.rstrip().endswith(_MARKER_BODY)
