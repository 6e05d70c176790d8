"""Format-constrained rollouts (#26): the frame grammar allows every token the interpreter's
trace holds, a constrained bundled model always writes frames that parse, and the constraint
travels to a vLLM server, is refused by fgserve, and is kept in a saved session.

The true trace goes through the real :class:`Rollout`: :class:`TruthBackend` writes the
interpreter's frames one by one and checks each token against the mask of the constraint the
rollout asked for (the bundled tokenizer's byte automaton, and llguidance over CWM's own BPE).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cwmtui.interpreter import cruxeval_program, load_program, program_from_source
from cwmtui.model import ModelError, Rollout, RolloutOptions, RolloutStatus
from cwmtui.model.backend import Backend, Completion
from cwmtui.model.byte_constraint import DONE, ByteGrammar, FrameAutomaton
from cwmtui.model.byte_tokenizer import BYTE_OFFSET
from cwmtui.model.frame_grammar import FrameConstraint, FrameGrammar, _regex_literal
from cwmtui.model.tokenizer import byte_tokenizer
from cwmtui.trace import Event, parse_trace, tokens
from cwmtui.trace.render import Compressor, frame_segments, prompt_segments

from .conftest import CRUXEVAL, ROOT

SAMPLES = sorted((ROOT / "samples").glob("*.py"))
UNLIMITED = RolloutOptions(token_budget=1 << 40, frame_tokens=1 << 30, max_frames=1 << 30, constrain=True)


class TruthBackend(Backend):
    """Writes the interpreter's trace, a frame a call (the end of text after the last), and
    checks every token against the mask of the call's constraint with ``check(constraint,
    ids)``: the index of the first token refused, or None."""

    name = "truth"

    def __init__(self, tokenizer, program, frames, check) -> None:
        self._tokens = tokenizer
        self.special_ids = tokenizer.special_ids
        self.check = check
        compressor = Compressor()
        self.frame_ids = [self.encode_segments(frame_segments(f, compressor)) for f in frames]
        at = len(self.encode_segments(prompt_segments(program.source)))
        self.frame_at: dict[int, int] = {}
        for k, ids in enumerate(self.frame_ids):
            self.frame_at[at] = k
            at += len(ids)
        self.frame_at[at] = len(frames)
        self.refused: list[tuple[int, int, str]] = []  # (frame, token index, the frame's text)
        self.unchecked = 0

    def encode(self, text):
        return self._tokens.encode(text)

    def decode(self, ids):
        return self._tokens.decode(ids)

    def constraint_problem(self):
        return None

    def complete(self, prompt_ids, stop_ids, max_new_tokens, temperature=0.0, top_p=1.0, seed=None,
                 cancel=None, constraint=None):
        k = self.frame_at[len(prompt_ids)]
        ids = self.frame_ids[k] if k < len(self.frame_ids) else [self.eos_id]
        if constraint is None:
            self.unchecked += 1
        else:
            refused = self.check(constraint, ids)
            if refused is not None:
                self.refused.append((k, refused, self.decode(ids)))
        return Completion(list(ids), 0, "eos" if ids[-1] == self.eos_id else "stop")


def byte_check(special_ids):
    """The bundled tokenizer's check: the byte automaton, with the frame limit's room."""
    grammars: dict[FrameGrammar, ByteGrammar] = {}

    def check(constraint: FrameConstraint, ids) -> int | None:
        grammar = grammars.get(constraint.grammar)
        if grammar is None:
            grammar = grammars[constraint.grammar] = ByteGrammar(constraint.grammar, special_ids, BYTE_OFFSET)
        automaton = FrameAutomaton(grammar, constraint)
        for index, token in enumerate(ids):
            automaton.allowed(len(ids) + 1000 - index)
            if not automaton.take(token):
                return index
        return None

    return check


def guidance_check(tokenizer):
    """CWM's BPE (tiktoken) through llguidance, as a transformers model or vLLM runs it."""
    pytest.importorskip("llguidance")
    import llguidance
    import llguidance.tiktoken

    from cwmtui.model.guided import FrameCloser, GuidedGrammars

    lltok = llguidance.tiktoken.lltokenizer_from_encoding(
        tokenizer._encoding, n_vocab=tokenizer.vocab_size, eos_token=tokenizer.special_ids[tokens.END_OF_TEXT])
    grammars = GuidedGrammars.of_lltokenizer(lltok, tokenizer.vocab_size, tokenizer.special_ids)
    compiled: dict[str, object] = {}

    def check(constraint: FrameConstraint, ids) -> int | None:
        text = constraint.grammar.lark(constraint)
        matcher = compiled.get(text)
        if matcher is None:
            matcher = compiled[text] = llguidance.LLMatcher(lltok, llguidance.grammar_from("lark", text))
            assert not matcher.is_error(), matcher.get_error()
        accepted = matcher.deep_copy().validate_tokens(list(ids))
        if accepted != len(ids):
            return accepted
        # the frame limit's follower (FrameCloser) keeps up with every true frame to its end
        closer = FrameCloser(grammars._token_costs(constraint.grammar), grammars.vocabulary, constraint)
        for index, token in enumerate(ids):
            if token != tokenizer.special_ids[tokens.END_OF_TEXT]:
                closer.take(token)
            if closer.automaton is None:
                return index
        assert closer.automaton.mode == DONE or ids[-1] == tokenizer.special_ids[tokens.END_OF_TEXT], tokenizer.decode(ids)
        return None

    return check


def run_truth(tokenizer, check, program, truth) -> TruthBackend:
    backend = TruthBackend(tokenizer, program, truth.frames, check)
    rollout = Rollout(backend, program, None, UNLIMITED)  # the model writes every frame, the entry's call too
    assert rollout.constrained
    rollout.run()
    assert backend.unchecked == 0 and backend.refused == [], (program.path, backend.refused[:1])
    assert rollout.status is (RolloutStatus.ENDED if truth.status.ok else rollout.status)
    assert len(rollout.frames) == len(truth.frames) and not any(f.is_error for f in rollout.frames)
    return backend


def cruxeval_truths(interpreter, every: int = 1):
    with open(CRUXEVAL, encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle if line.strip()][::every]
    for sample in samples:
        program = cruxeval_program(sample["code"], sample["input"])
        yield program, interpreter.trace(program)


# -- the truth goes through the mask -----------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_every_true_token_of_a_sample_is_allowed_bytes_and_bpe(interpreter, sample):
    program = load_program(str(sample))
    truth = interpreter.trace(program)
    assert truth.frames
    run_truth(byte_tokenizer(), byte_check(byte_tokenizer().special_ids), program, truth)
    pytest.importorskip("llama_models")
    from cwmtui.model.cwm_tokenizer import CWMTokenizer

    cwm = CWMTokenizer("cwm")
    run_truth(cwm, guidance_check(cwm), program, truth)


def test_every_true_token_of_the_800_cruxeval_programs_is_allowed(interpreter):
    """All 800 through the byte automaton, and through llguidance over CWM's BPE (~40 s here)."""
    tokenizer = byte_tokenizer()
    check = byte_check(tokenizer.special_ids)
    cwm = guided = None
    try:
        from cwmtui.model.cwm_tokenizer import CWMTokenizer

        cwm = CWMTokenizer("cwm")
        guided = guidance_check(cwm)
    except (ImportError, ModelError, pytest.skip.Exception):
        pass
    count = 0
    for program, truth in cruxeval_truths(interpreter):
        run_truth(tokenizer, check, program, truth)
        if guided is not None:
            run_truth(cwm, guided, program, truth)
        count += 1
    assert count == 800


# -- what the mask refuses -----------------------------------------------------------------------

LOOP = "def f(n):  # << START_OF_TRACE\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"


def byte_automaton(constraint_kwargs, source=LOOP):
    tokenizer = byte_tokenizer()
    grammar = FrameGrammar.of_source(program_from_source(source, "<f>", call="f(3)").source)
    constraint = FrameConstraint(grammar, **constraint_kwargs)
    return tokenizer, FrameAutomaton(ByteGrammar(grammar, tokenizer.special_ids, BYTE_OFFSET), constraint)


def first_refused(text: str, **constraint_kwargs) -> str | None:
    """Feed CWM text (special tokens as their strings) through the mask: the text from the first
    token it refuses on, or None when it takes all of it."""
    from cwmtui.trace.parser import split_text

    tokenizer, automaton = byte_automaton(constraint_kwargs)
    ids = []
    for piece in split_text(text):
        ids += [tokenizer.special_ids[str(piece)]] if piece in tokens.SPECIAL_TOKENS else tokenizer.encode(piece)
    for index, token in enumerate(ids):
        automaton.allowed()
        if not automaton.take(token):
            return tokenizer.decode(ids[index:])
    return None


@pytest.mark.parametrize("text, refused_from, kwargs", [
    ('<|line_sep|>{"n": "3", "s": "0"}<|action_sep|>    s = 0\n<|frame_sep|>', None, {}),
    ('<|line_sep|>{"n": "3"}<|action_sep|>    s = 1\n<|frame_sep|>', "1\n<|frame_sep|>", {}),  # not a line of the program
    ('<|line_sep|>{"n": "3"}<|action_sep|>    s = 0  # << START_OF_TRACE\n', "  # << START_OF_TRACE\n", {}),
    ("<|line_sep|>{'n': '3'}", "'n': '3'}", {}),  # JSON, not a repr
    ('<|line_sep|>{"n":"3"}', '"3"}', {}),  # json.dumps's spacing
    ('<|line_sep|>{"total": "3"}', 'total": "3"}', {}),  # no scope of the program has this name
    ('<|line_sep|>{"n": 3}', '3}', {}),  # values are strings
    ('<|line_sep|>{"n": "caf\u00e9"}', '\u00e9"}', {}),  # ASCII: \u00e9
    ('<|line_sep|>{"n": "caf\\u00e9"}<|action_sep|>', None, {}),
    ('<|line_sep|>{"n": "\\u002e"}', '2e"}', {}),  # a dot is written as a dot
    ('<|call_sep|>{"n": ".."}', '"}', {}),  # ".." in a call frame: nothing to stand for
    ('<|line_sep|>{"n": ".."}<|action_sep|>', None, {"base": frozenset({"n"})}),
    ('<|line_sep|>{"s": ".."}', '"}', {"base": frozenset({"n"})}),  # s was not in the frame before
    ('<|return_sep|><|action_sep|>    return s\n<|arg_sep|>"6"<|frame_sep|>', None, {}),
    ('<|return_sep|><|action_sep|>    return s\n<|frame_sep|>', "<|frame_sep|>", {}),  # a return has a value
    ('<|return_sep|>{}', "{}", {}),  # and no locals
    ("<|end_of_text|>", "<|end_of_text|>", {}),  # the entry has not returned
    ("<|end_of_text|>", None, {"events": (), "may_end": True}),
    ("<|line_sep|>", "<|line_sep|>", {"events": (), "may_end": True}),  # it has: nothing comes after it
    ('"6"<|frame_sep|>', None, {"start": "value", "event": Event.RETURN}),
])
def test_the_mask_refuses_what_the_parser_would_call_a_format_error(text, refused_from, kwargs):
    assert first_refused(text, **kwargs) == refused_from


def test_a_frame_near_the_frame_limit_is_closed_in_time():
    """With the room of the frame limit, a value that would run past it is closed early: the
    frame parses (a wrong value, not a format error)."""
    tokenizer, automaton = byte_automaton({"close_within": True, "events": (Event.LINE,)})
    room = 40
    written = []
    for _ in range(room):
        allowed = automaton.allowed(room - len(written)).tolist()
        # a model that would write 1s forever, inside the first value it can
        wanted = [tokenizer.encode(c)[0] for c in '1"{ns'] + allowed
        token = next(t for t in wanted if t in allowed)
        assert automaton.take(token)
        written.append(token)
        if token == tokenizer.special_ids[tokens.FRAME_SEP]:
            break
    text = tokenizer.decode(written)
    assert text.startswith('<|line_sep|>{"n": "1111') and len(written) <= room, text
    frame, = parse_trace(text, LOOP).frames
    assert not frame.is_error and frame.locals["n"].startswith("111"), text


@pytest.fixture(scope="module")
def bpe_grammars(tmp_path_factory):
    """llguidance over the tiny BPE tokenizer of :func:`build_bpe_model` (as a --model
    directory's), with the HF tokenizer."""
    pytest.importorskip("llguidance")
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from cwmtui.model.guided import GuidedGrammars

    hf = AutoTokenizer.from_pretrained(build_bpe_model(tmp_path_factory.mktemp("bpe") / "m"))
    special_ids = {name: hf.convert_tokens_to_ids(name) for name in tokens.SPECIAL_TOKENS}
    return GuidedGrammars(hf, special_ids), hf, special_ids


def runaway(hf, special_ids, mask, room: int, prefer: str = "1") -> list[int]:
    """A model that writes ``prefer`` forever inside the first value it can (as long a token
    of it as there is), through ``mask`` with ``room`` tokens: the ids it wrote."""
    vocab = len(hf)
    runs = sorted((i for i in range(vocab) if i not in special_ids.values() and hf.decode([i]) and set(hf.decode([i])) == {prefer}),
                  key=lambda i: -len(hf.decode([i])))
    chars = [next(i for i in range(vocab) if hf.decode([i]) == c and i not in special_ids.values()) for c in '"{ns']
    written: list[int] = []
    while len(written) < room:
        allowed = mask.allowed(room - len(written)).tolist()
        assert allowed, hf.decode(written)
        token = next(t for t in runs + chars + allowed if t in allowed)
        assert mask.take(token)
        written.append(token)
        if token == special_ids[tokens.FRAME_SEP]:
            break
    return written


@pytest.mark.parametrize("room", [40, 64, 200])
def test_a_bpe_frame_near_the_frame_limit_is_closed_in_time(bpe_grammars, room):
    """Review of #26: through llguidance a frame had no end in sight: a model that runs away in
    a value wrote past --frame-tokens, a format error under the constraint. Now, as the byte
    automaton does for the bundled model, the value is cut short in time: the frame parses."""
    grammars, hf, special_ids = bpe_grammars
    source = program_from_source(LOOP, "<f>", call="f(3)").source
    constraint = FrameConstraint(FrameGrammar.of_source(source), events=(Event.LINE,), close_within=True)
    written = runaway(hf, special_ids, grammars.filter(constraint), room)
    text = hf.decode(written)
    assert written[-1] == special_ids[tokens.FRAME_SEP] and len(written) <= room, text
    frame, = parse_trace(text, LOOP).frames
    assert not frame.is_error and frame.locals["n"].startswith("111"), text
    assert len(written) >= room - 30  # the value ran on as long as the room let it (the way out counted from above)


def test_a_bpe_frame_far_from_its_limit_is_left_to_the_model(bpe_grammars):
    """Without the frame limit's room (the trace's budget binds, or the room is far off), the
    mask is llguidance's alone."""
    grammars, hf, special_ids = bpe_grammars
    source = program_from_source(LOOP, "<f>", call="f(3)").source
    grammar = FrameGrammar.of_source(source)
    free = grammars.filter(FrameConstraint(grammar, events=(Event.LINE,)))
    assert free.closer is None
    written = runaway(hf, special_ids, free, 60)
    assert special_ids[tokens.FRAME_SEP] not in written and len(written) == 60  # (it runs on: the budget's to stop)
    closing = grammars.filter(FrameConstraint(grammar, events=(Event.LINE,), close_within=True))
    far = runaway(hf, special_ids, closing, 400)
    assert far[:60] == written  # far from the limit (400 tokens of room), the same tokens


LONG_NAME = "def f(a):  # << START_OF_TRACE\n    q_w_e_r_t_y_u_i_o_p_a_s_d_f_g_h = a\n    return a\n"


def after_a_name_comes_another(allowed, take, encode, frame_sep, room: int, bytes_of) -> list[int]:
    """A model that writes ``{"a": "1"`` and then a comma (another name) whenever it may."""
    written: list[int] = []
    for token in encode:
        allowed(room - len(written))
        assert take(token)
        written.append(token)
    while len(written) < room:
        ids = allowed(room - len(written)).tolist()
        token = next((i for i in ids if bytes_of(i) in (b'",', b",", b" ")), ids[0])
        assert take(token)
        written.append(token)
        if token == frame_sep:
            break
    return written


def test_a_name_written_already_is_not_counted_as_a_way_to_close(bpe_grammars):
    """Review of #26: near the limit the way out was counted through the shortest name, though
    it was written already (a name comes once): after `"a": "1"` the mask let a comma in where
    only the long name was left, and the frame ran past the limit (a format error), for the
    bundled model's automaton and for llguidance's follower alike."""
    source = program_from_source(LONG_NAME, "<f>", call="f(3)").source
    grammar = FrameGrammar.of_source(source)
    byte = byte_tokenizer()
    frame_sep = byte.special_ids[tokens.FRAME_SEP]
    for room in range(24, 72):  # (below 24 not even the shortest line fits after the opening)
        automaton = FrameAutomaton(ByteGrammar(grammar, byte.special_ids, BYTE_OFFSET),
                                   FrameConstraint(grammar, events=(Event.LINE,), close_within=True))
        opening = [byte.special_ids[Event.LINE.token]] + byte.encode('{"a": "1"')
        written = after_a_name_comes_another(automaton.allowed, automaton.take, opening, frame_sep, room,
                                             lambda i: bytes([i - BYTE_OFFSET]) if 0 <= i - BYTE_OFFSET < 256 else b"")
        assert written[-1] == frame_sep and len(written) <= room, (room, byte.decode(written))
        assert not parse_trace(byte.decode(written), LONG_NAME).frames[0].is_error
    grammars, hf, special_ids = bpe_grammars
    vocabulary = grammars.vocabulary
    frame_sep = special_ids[tokens.FRAME_SEP]
    for room in range(24, 72):
        mask = grammars.filter(FrameConstraint(grammar, events=(Event.LINE,), close_within=True))
        opening = [special_ids[Event.LINE.token]] + hf.encode('{"a": "1"', add_special_tokens=False)
        written = after_a_name_comes_another(mask.allowed, mask.take, opening, frame_sep, room, lambda i: vocabulary.bytes[i])
        assert written[-1] == frame_sep and len(written) <= room, (room, hf.decode(written))
        assert not parse_trace(hf.decode(written), LONG_NAME).frames[0].is_error


def test_every_state_of_the_mask_leads_to_the_end_of_the_frame():
    """No dead end: from any prefix the mask allows, some token is allowed and the frame can
    close (a random walk through the mask, many times, always ends at <|frame_sep|>)."""
    import random

    sources = [LOOP, "def f():  # << START_OF_TRACE\n    return 1\n",  # no local name at all
               "def f(a, ab):  # << START_OF_TRACE\n    return [ab for a in ab]\n"]
    for source in sources:
        tokenizer = byte_tokenizer()
        grammar = FrameGrammar.of_source(program_from_source(source, "<f>", call="f()").source)
        byte_grammar = ByteGrammar(grammar, tokenizer.special_ids, BYTE_OFFSET)
        frame_sep = tokenizer.special_ids[tokens.FRAME_SEP]
        rng = random.Random(0)
        for _ in range(300):
            automaton = FrameAutomaton(byte_grammar, FrameConstraint(grammar, base=frozenset({"a", "n"}), close_within=True))
            room = rng.choice([30, 60, 200])
            written = []
            while not written or written[-1] != frame_sep:
                allowed = automaton.allowed(room - len(written)).tolist()
                assert allowed, (source, tokenizer.decode(written))
                token = rng.choice(allowed)
                assert automaton.take(token)
                written.append(token)
            text = tokenizer.decode(written)
            assert len(written) <= room, text
            frame, = parse_trace(text, source).frames
            assert frame.error is None or "'..'" in frame.error, text  # ('..' needs a base: none here)


def test_a_program_that_writes_its_own_locals_allows_any_name():
    source = 'def f(n):  # << START_OF_TRACE\n    locals()["x y"] = 1\n    return n\n'
    grammar = FrameGrammar.of_source(program_from_source(source, "<f>", call="f(1)").source)
    assert grammar.names is None
    assert FrameGrammar.of_source(LOOP).names == ("i", "n", "s")


# -- models decoding under the mask --------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled():
    from cwmtui.model.opening import bundled_problem, open_bundled

    if bundled_problem() is not None:
        pytest.skip("the bundled model is not installed")
    with open_bundled(device="cpu") as backend:
        yield backend


@pytest.mark.parametrize("name", ["exception.py", "nested.py", "strings.py"])
def test_the_bundled_model_constrained_writes_only_frames_that_parse(interpreter, bundled, name):
    program = load_program(str(ROOT / "samples" / name))
    truth = interpreter.trace(program)
    options = RolloutOptions(token_budget=1500)
    rollout = Rollout(bundled, program, truth.frames[0], options)
    assert rollout.constrained and options.constrain is True  # the bundled model's default, recorded
    rollout.run()
    generated = rollout.frames[1:]
    assert generated and not [f.error for f in generated if f.is_error]
    assert rollout.status is not RolloutStatus.FRAME_LIMIT
    lines = set(FrameGrammar.of_source(program.source).lines)
    assert all(f.action in lines for f in generated)
    free = Rollout(bundled, program, truth.frames[0], RolloutOptions(token_budget=1500, constrain=False))
    assert not free.constrained


@pytest.mark.parametrize("frame_tokens", [400, 40])
def test_a_bpe_model_decodes_under_the_grammar_through_llguidance(tmp_path, interpreter, frame_tokens):
    """A tiny random transformers model with a BPE tokenizer (not the byte one): llguidance masks
    its logits, so even random weights write frames that parse; with a tight --frame-tokens
    (review of #26) the frames close in time too, instead of running past it as format errors."""
    pytest.importorskip("llguidance")
    torch = pytest.importorskip("torch")
    from cwmtui.model.opening import open_model_dir

    path = build_bpe_model(tmp_path / "bpe")
    program = program_from_source(LOOP, "<f>", call="f(3)")
    truth = interpreter.trace(program)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with open_model_dir(str(path), device="cpu") as backend:
            assert backend.constraint_problem() is None and not backend._byte_level  # llguidance's mask
            for seed in range(3):
                options = RolloutOptions(token_budget=400, frame_tokens=frame_tokens, constrain=True, temperature=1.0, seed=seed)
                rollout = Rollout(backend, program, truth.frames[0], options)
                rollout.run()
                generated = rollout.frames[1:]
                assert generated and not [f.error for f in generated if f.is_error], rollout.text()
                assert rollout.status is not RolloutStatus.FRAME_LIMIT
                assert all(f.tokens <= frame_tokens for f in generated)
                assert all(f.action in FrameGrammar.of_source(program.source).lines for f in generated)
    finally:
        torch.set_num_threads(threads)


def build_bpe_model(path: Path) -> Path:
    """A tiny random Llama with a byte-level BPE tokenizer trained here, the CWM special tokens
    among its added tokens."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = list(tokens.SPECIAL_TOKENS) + [tokens.PAD]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([p.read_text() for p in SAMPLES] * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=tokens.BEGIN_OF_TEXT,
                                        eos_token=tokens.END_OF_TEXT, pad_token=tokens.PAD)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    path.mkdir(parents=True)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_without_llguidance_a_bpe_model_refuses_the_constraint_in_one_line(monkeypatch):
    import sys

    from cwmtui.model.guided import guidance_problem

    monkeypatch.setitem(sys.modules, "llguidance", None)  # as if the extra were not installed
    said = guidance_problem(object())
    assert said == ("--constrain with a --model directory (a BPE tokenizer) needs llguidance, which the core "
                    "install leaves out: pip install 'cwmtui[constrain]'")


# -- servers ------------------------------------------------------------------------------------


def test_the_vllm_request_carries_the_frame_grammar(interpreter):
    from .test_model_server import FakeServer, quick, script_of

    program = program_from_source(LOOP, "<f>", call="f(3)")
    truth = interpreter.trace(program)
    server = FakeServer("vllm")
    try:
        server.script = script_of(program, truth.frames)
        with quick(server.url) as backend:
            assert backend.constraint_problem() is None
            rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(constrain=True))
            assert rollout.run() is RolloutStatus.ENDED
        assert rollout.frames == truth.frames
        free = quick(server.url)
        Rollout(free, program, truth.frames[0], RolloutOptions(constrain=False)).step()
        free.close()
    finally:
        server.close()
    asked = [p for path, p in server.requests if path == "/v1/completions"]
    constrained, unconstrained = asked[:-1], asked[-1]
    assert len(constrained) == len(truth.frames)
    for payload in constrained:
        grammar = payload["structured_outputs"]["grammar"]
        assert payload["guided_grammar"] == grammar  # the field vLLM 0.10 reads
        assert grammar.startswith("start: ")
        for line in ("def f(n):\n", "    s = 0\n", "        s += i\n", "    return s\n"):
            assert _regex_literal(line) in grammar  # the program's own lines (the marker left out)
        assert "START_OF_TRACE" not in grammar
    first, last = constrained[0]["structured_outputs"]["grammar"], constrained[-1]["structured_outputs"]["grammar"]
    assert first.splitlines()[0] == ("start: <|call_sep|> CALL_LOCALS <|action_sep|> LINE <|frame_sep|> | "
                                     "<|line_sep|> LINE_LOCALS <|action_sep|> LINE <|frame_sep|> | "
                                     "<|return_sep|> <|action_sep|> LINE <|arg_sep|> STRING <|frame_sep|> | "
                                     "<|exception_sep|> <|action_sep|> LINE <|arg_sep|> STRING <|frame_sep|>")
    assert last.splitlines()[0] == 'start: ""'  # after the entry's return: only the end of text
    assert "structured_outputs" not in unconstrained and "guided_grammar" not in unconstrained


def test_fgserve_refuses_the_constraint_in_one_line(tmp_path, capsys):
    from cwmtui.cli import main
    from cwmtui.model.backend import FGSERVE_NO_GRAMMAR

    program = tmp_path / "p.py"
    program.write_text(LOOP + "\nf(3)\n")
    code = main(["diff", str(program), "--server", "http://127.0.0.1:9", "--server-kind", "fgserve", "--constrain"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].endswith(FGSERVE_NO_GRAMMAR), err
    assert FGSERVE_NO_GRAMMAR.startswith("fgserve has no structured output")


# -- options, sessions and the status bar -------------------------------------------------------


def parse(*argv):
    import argparse

    from cwmtui.cli.model_options import add_model_options, rollout_options_from_args

    parser = argparse.ArgumentParser(prog="cwmtui test")
    add_model_options(parser)
    return rollout_options_from_args(parser.parse_args(list(argv)))


def test_constrain_and_free_choose_and_without_them_the_model_does(capsys, interpreter):
    assert parse().constrain is None and parse("--server", "http://localhost:8000").constrain is None
    assert parse("--free").constrain is False
    assert parse("--model", "/models/cwm", "--constrain").constrain is True
    with pytest.raises(SystemExit):
        parse("--constrain", "--free")
    assert "not allowed with argument" in capsys.readouterr().err
    # the model's default is decided by the model opened, and recorded in the options
    from .world_models import OracleBackend

    program = program_from_source(LOOP, "<f>", call="f(3)")
    truth = interpreter.trace(program)
    options = parse()
    assert not Rollout(OracleBackend(program, truth.frames), program, truth.frames[0], options).constrained
    assert options.constrain is False  # any model but the bundled one: free


def test_a_replay_refuses_the_constraint_in_one_line(tmp_path, capsys):
    from cwmtui.cli import main

    program = tmp_path / "p.py"
    program.write_text(LOOP + "\nf(3)\n")
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"id": "a", "program": program.read_text(), "generation": ""}) + "\n")
    code = main(["diff", str(program), "--replay", str(replay), "--constrain"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["cwmtui: error: --constrain needs a live model: a --replay reproduces the recorded generations as they were"]


def test_the_constraint_round_trips_through_a_saved_session_and_shows_in_the_status_bar(tmp_path, interpreter):
    from cwmtui.session import DebugSession
    from cwmtui.ui.branch_view import BranchView, SessionView

    program = program_from_source(LOOP, "<f>", call="f(3)")
    truth = interpreter.trace(program)
    tokenizer = byte_tokenizer()
    backend = TruthBackend(tokenizer, program, truth.frames, byte_check(tokenizer.special_ids))
    session = DebugSession(program, backend, RolloutOptions(constrain=True), truth=truth)
    session.run_main()
    assert backend.unchecked == 0 and backend.refused == []  # it really ran under the grammar
    path = tmp_path / "session.json"
    session.save(str(path))
    assert json.loads(path.read_text())["settings"]["rollout"]["constrain"] is True

    reopened = DebugSession.load(str(path))
    assert reopened.options.constrain is True and reopened.branches[0].settings["constrain"] is True
    view = SessionView.from_session(reopened)
    main_view = BranchView(reopened.truth, reopened.branch_state(reopened.branches[0]))
    assert view.constrained_of(main_view) and view.decoding_of(main_view) == "greedy · budget 8,192"
    assert not SessionView.from_session(DebugSession(program, None, truth=truth)).constrained  # no model: nothing decodes

    old = DebugSession.load(str(ROOT / "tests" / "fixtures" / "session_v1.json"))
    assert old.options.constrain is False  # saved before the grammar: it decoded without it


def test_a_damaged_constrain_setting_is_refused_at_load(tmp_path, interpreter):
    from cwmtui.session import DebugSession, SessionError

    program = program_from_source(LOOP, "<f>", call="f(3)")
    session = DebugSession(program, None, RolloutOptions(constrain=False), truth=interpreter.trace(program))
    path = tmp_path / "session.json"
    session.save(str(path))
    data = json.loads(path.read_text())
    data["settings"]["rollout"]["constrain"] = "yes"
    path.write_text(json.dumps(data))
    with pytest.raises(SessionError, match="constrain is 'yes', not true or false"):
        DebugSession.load(str(path))


async def test_the_status_bar_says_constrained_beside_the_model(interpreter):
    import dataclasses

    from cwmtui.ui.app import CwmApp

    from .ui.sessions import strings_view

    for constrained in (True, False):
        view = dataclasses.replace(strings_view(interpreter), constrained=constrained)
        app = CwmApp(view)
        async with app.run_test(size=(200, 40)):
            status = app.debugger.query_one("#status").plain
        assert ("model constrained replay" in status) is constrained, status
        assert "model " in status and "greedy" in status


def test_a_name_is_written_once_in_a_frame():
    """json.dumps never repeats a key (the bundled model, before this rule, wrote {"a": "..", "a": ".."})."""
    assert first_refused('<|line_sep|>{"n": "3", "s": "0", "n": "4"}') == 'n": "4"}'
    assert first_refused('<|line_sep|>{"i": "0", "n": "3", "s": "0", "i": "1"}') == ', "i": "1"}'  # no name left


def test_the_model_card_says_the_bundled_model_runs_constrained():
    from cwmtui.model.opening import BUNDLED_DIR
    from cwmtui.training.card import render

    with open(Path(BUNDLED_DIR) / "measurements.json", encoding="utf-8") as handle:
        measured = json.load(handle)
    card = render(BUNDLED_DIR, measured)
    assert "## Decoding: constrained by default" in card and "`--free` gives the raw model" in card
    assert "| constrained | 100% (99.5-100.0) |" in card  # the figures measured apart (all 800 CRUXEval programs) are kept
    assert card == (Path(BUNDLED_DIR) / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_the_bundled_model_decodes_constrained_without_the_constrain_extra():
    """The byte automaton is the core install's: no llguidance, no torch, no transformers."""
    import subprocess
    import sys

    code = """
import sys
for name in ("llguidance", "torch", "transformers"):
    sys.modules[name] = None
from cwmtui.cli import main
sys.exit(main(["diff", sys.argv[1], "--token-budget", "300", "--json"]))
"""
    done = subprocess.run([sys.executable, "-c", code, str(ROOT / "samples" / "swaps.py")], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["first_divergence"]["kind"] != "format"


ENUM_BODY = """\
from enum import Enum


def f(n):  # << START_OF_TRACE
    class Color(Enum):
        RED = 1
        GREEN = 2
    return Color(n).name
"""


def test_a_class_whose_metaclass_fills_its_namespace_is_allowed(interpreter):
    """Review: Enum's __prepare__ puts _generate_next_value_ into the class body's locals, a name
    the body never writes: the mask refused the true frame, and blamed the model for it."""
    from cwmtui.interpreter import program_from_source

    program = program_from_source(ENUM_BODY, "enum_body.py", call="f(2)")
    truth = interpreter.trace(program)
    assert any("_generate_next_value_" in (frame.locals or {}) for frame in truth.frames)
    run_truth(byte_tokenizer(), byte_check(byte_tokenizer().special_ids), program, truth)
