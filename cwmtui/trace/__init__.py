"""The trace vocabulary: events, frames, traces, and the CWM text format (stdlib only)."""

from . import tokens
from .frame import Event, Frame, OutputChunk, Status, Trace, TraceStatus
from .parser import TraceParser, parse_trace, split_text
from .render import (
    Compressor,
    Special,
    frame_segments,
    frames_segments,
    prompt_segments,
    render_frames,
    render_trace,
)
from .rollout_status import RolloutStatus
from .source import SourceMap

__all__ = [
    "tokens",
    "Event",
    "Frame",
    "OutputChunk",
    "Status",
    "Trace",
    "TraceStatus",
    "TraceParser",
    "parse_trace",
    "split_text",
    "Compressor",
    "Special",
    "frame_segments",
    "frames_segments",
    "prompt_segments",
    "render_frames",
    "render_trace",
    "SourceMap",
    "RolloutStatus",
]
