"""Meta's own tokenizer file (tiktoken BPE ranks) for --tokenizer, CWM's tokenizer with no
checkpoint ('cwm', from the llama-models package), the check that special tokens stay special,
and --lens-tokenizer."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from cwmtui.model import ModelError, open_backend
from cwmtui.model.backend import check_text_stays_text
from cwmtui.model.cwm_tokenizer import CWMTokenizer, builtin_path
from cwmtui.model.tokenizer import load_any_tokenizer
from cwmtui.trace import tokens

SOURCE = 'def f(s):  # << START_OF_TRACE\n    t = "<|frame_sep|>" + s\n    return t\n'


@pytest.fixture(scope="module")
def meta_file(tmp_path_factory):
    """A checkpoint folder as Meta's download script leaves it: tokenizer.model and no HF files."""
    folder = tmp_path_factory.mktemp("checkpoint")
    shutil.copy(builtin_path(), folder / "tokenizer.model")
    return folder / "tokenizer.model"


def test_metas_tokenizer_file_has_the_cwm_special_tokens_at_their_ids(meta_file):
    tokenizer = load_any_tokenizer(str(meta_file))
    assert tokenizer.special_ids == {t: tokens.CWM_IDS[t] for t in tokens.SPECIAL_TOKENS}
    assert tokenizer.find_special("<|eot_id|>") == 128009 and tokenizer.find_special("<|eom_id|>") == 128008
    ids = tokenizer.encode(SOURCE)
    assert 128100 not in ids and all(i < 128000 for i in ids)  # the literal stays text
    assert tokenizer.decode(ids) == SOURCE
    assert tokenizer.decode([128103, *tokenizer.encode("{}"), 128101]) == "<|call_sep|>{}<|action_sep|>"
    assert tokenizer.encode("    return t\n") == [262, 471, 259, 198]  # Llama 3 BPE: four spaces are one token


def test_a_checkpoint_folder_and_the_builtin_name_give_the_same_tokenizer(meta_file):
    from_folder = load_any_tokenizer(str(meta_file.parent))
    builtin = load_any_tokenizer("cwm")
    assert isinstance(from_folder, CWMTokenizer) and isinstance(builtin, CWMTokenizer)
    assert from_folder.encode(SOURCE) == builtin.encode(SOURCE)


def test_ids_no_token_has_decode_to_nothing(meta_file):
    tokenizer = load_any_tokenizer(str(meta_file))
    assert tokenizer.decode([10**9, -1, 128255, *tokenizer.encode("ok")]) == "<|reserved_special_token_255|>ok"


@pytest.mark.parametrize("content, message", [
    (b"not base64 at all!\n", r":1: not a tiktoken BPE file"),
    (b"", r"empty, not a tiktoken BPE file"),
    (base64.b64encode(b"a") + b" 0\n", r"1 BPE ranks, not the 128,000 of CWM's \(Llama 3\) tokenizer"),
])
def test_a_file_that_is_not_metas_tokenizer_is_one_line(tmp_path, content, message):
    path = tmp_path / "tokenizer.model"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=message):
        load_any_tokenizer(str(path))


class Parsing:
    """A tokenizer that turns a special token's string inside text into the special id."""

    special_ids = {t: 300 + i for i, t in enumerate(tokens.SPECIAL_TOKENS)}

    def encode(self, text: str) -> list[int]:
        return [self.special_ids[text]] if text in self.special_ids else list(text.encode())


def test_a_tokenizer_that_parses_special_strings_in_text_is_refused():
    with pytest.raises(ModelError, match=r"turns the text '<\|begin_of_text\|>' into the special token .*not usable for traces"):
        check_text_stays_text(Parsing(), "some-tokenizer")


def test_a_replay_counts_cwm_tokens_with_tokenizer_cwm(tmp_path, interpreter):
    from cwmtui.interpreter import program_from_source
    from cwmtui.model.replay import ReplayBackend
    from cwmtui.model.rollout import Rollout
    from cwmtui.trace.render import render_frames

    source = "def f(s):  # << START_OF_TRACE\n    t = s * 3\n    return t + 'straw'\n"
    program = program_from_source(source, "<f>", call="f('x')")
    truth = interpreter.trace(program)
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps({"id": "a", "program": source, "call": "f('x')", "generation": render_frames(truth.frames, end=True)}) + "\n")
    backend = ReplayBackend.open(str(path), tokenizer="cwm")
    assert backend.description.endswith("tokens of cwm")
    rollout = Rollout(backend, backend.program, None)
    rollout.run()
    assert rollout.frames == truth.frames
    bytes_backend = ReplayBackend.open(str(path))
    counted = Rollout(bytes_backend, bytes_backend.program, None)
    counted.run()
    assert 0 < rollout.tokens_used < counted.tokens_used / 2  # BPE tokens, not bytes


def test_the_lens_tokenizer_splits_the_bundled_models_values_in_cwm_tokens():
    bundled = open_backend()
    assert bundled.token_pieces('"strawberry"') == list('"strawberry"') and bundled.lens_label == "the model's tokenizer"
    lens = open_backend(lens_tokenizer="cwm")
    assert lens.token_pieces('"strawberry"') == ['"', "str", "aw", "berry", '"']
    assert lens.lens_label == "cwm (--lens-tokenizer)"
    assert lens.encode("ab") == bundled.encode("ab")  # the model still reads bytes


def test_a_bad_lens_tokenizer_is_one_line_before_the_model_loads(tmp_path):
    with pytest.raises(ModelError, match="no such file or directory"):
        open_backend(model=str(tmp_path / "never-opened"), lens_tokenizer=str(tmp_path / "missing"))


def test_ids_out_of_a_hugging_face_tokenizers_range_decode_to_nothing(tmp_path):
    """A server (--tokenizer DIR) can send ids the tokenizer has no token for."""
    from cwmtui.model.byte_tokenizer import build_byte_tokenizer

    build_byte_tokenizer().save_pretrained(tmp_path)
    tokenizer = load_any_tokenizer(str(tmp_path))
    ok = tokenizer.encode("ok")
    assert tokenizer.decode([99999, -1, 2**40, *ok]) == "ok"
