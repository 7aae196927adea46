"""The guard's words are data (guard/lexicons/*.toml): every language the issue names has one, each loads, and a
broken one is refused with where it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import lexicon
from guard.lexicon import CONCEPTS, LEXICONS, LexiconError, load, tool_concepts

LANGUAGES = {"en", "ar", "fr", "es", "de", "pt", "tr", "hi", "id", "it", "nl", "ur"}


def test_every_language_has_a_lexicon_with_its_claims_and_scope():
    assert LANGUAGES <= set(LEXICONS)
    for code, lex in LEXICONS.items():
        concepts = {form.concept for form in lex.forms}
        assert {"cancel", "refund", "handoff", "done"} <= concepts, code
        assert concepts <= CONCEPTS
        assert lex.words["negations"] and lex.words["irrealis"], code
        assert lex.numbers, code


def _write(tmp_path: Path, text: str, name: str = "xx") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'language = "{name}"\nname = "Test"\n' + text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[claims]]\nconcept = "teleport"\nforms = ["beamed"]\n', "concept 'teleport'"),
        ('colour = ["x"]\n[[claims]]\nconcept = "cancel"\nforms = ["x"]\n', "unknown keys ['colour']"),
        ('negations = "not"\n[[claims]]\nconcept = "cancel"\nforms = ["x"]\n', "negations: a list"),
        ('[[claims]]\nconcept = "cancel"\nforms = ["* cancelled"]\n', "must start and end on a word"),
        ('abbreviations = ["no"]\n[[claims]]\nconcept = "cancel"\nforms = ["x"]\n', "each ends in a dot"),
        ('[numbers]\n"two words" = 2\n[[claims]]\nconcept = "cancel"\nforms = ["x"]\n', "one word"),
        ("", "no claims"),
        ("[[claims]\n", "xx.toml:"),
    ],
)
def test_a_broken_lexicon_is_refused_with_where_it_breaks(tmp_path, text, says):
    with pytest.raises(LexiconError, match=None) as caught:
        load(_write(tmp_path, text))
    assert says in str(caught.value)


def test_a_form_that_a_clause_break_would_cut_is_refused(tmp_path):
    path = _write(tmp_path, 'breaks = ["but"]\n[[claims]]\nconcept = "cancel"\nforms = ["cancelled but refunded"]\n')
    with pytest.raises(LexiconError, match="could never be read whole"):
        lexicon.build({"xx": load(path)})


def test_a_file_must_be_named_for_its_language(tmp_path):
    path = tmp_path / "yy.toml"
    path.write_text('language = "xx"\n[[claims]]\nconcept = "cancel"\nforms = ["x"]\n', encoding="utf-8")
    with pytest.raises(LexiconError, match="file's name"):
        load(path)


def test_a_tools_name_says_which_actions_it_backs():
    assert {"change", "update"} <= (tool_concepts("update_address", lexicon.TOOL_WORDS) or set())
    assert "refund" in (tool_concepts("issueRefund", lexicon.TOOL_WORDS) or set())
    assert tool_concepts("do_the_thing", lexicon.TOOL_WORDS) is None
