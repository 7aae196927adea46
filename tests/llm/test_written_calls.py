"""Tool calls written as text (SPEC §5, seed "Fenced tools"), read by llm/written_calls.py: both forms, blocks that
can't be read, bounds, hostile text, and the incremental filter split at every position. Through the engine:
test_written_calls_engine.py."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm.written_calls import (
    MAX_BLOCK_CHARS,
    MAX_WRITTEN_CALLS,
    UNREADABLE_ARGUMENTS,
    UNREADABLE_CALL_NAME,
    WrittenCallFilter,
    recover_written_calls,
    written_call_id,
)
from tools import builtins
from tools.builtin_tool import Effect
from tools.policy import MAX_CALLS_PER_ROUND, parse_arguments
from tools.toolset import ToolKind, ToolSpec

ORDER = ToolSpec(
    name="order_status",
    kind=ToolKind.HTTP,
    effect=Effect.READ,
    description="An order's status.",
    parameters={
        "type": "object",
        "properties": {
            "order_number": {"type": "string"},
            "count": {"type": "integer"},
            "express": {"type": ["boolean", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
        },
    },
)


def recover(text, tools=(ORDER,)):
    return recover_written_calls(text, run_id="run_1", round_number=2, tools=tools)


def args(call):
    return json.loads(call.arguments)


def streamed(pieces):
    stream = WrittenCallFilter()
    out = "".join(stream.feed(piece) for piece in pieces)
    return out + stream.close()


# --- the two forms --------------------------------------------------------------------------------------------------


def test_a_tool_call_block_is_recovered_and_removed():
    block = '<tool_call>{"name": "order_status", "arguments": {"order_number": "8812"}}</tool_call>'
    found = recover(f"Let me check.\n{block}\nOne moment.")
    assert found.text == "Let me check.\n\nOne moment."
    [call] = found.calls
    assert call.name == "order_status" and args(call) == {"order_number": "8812"}
    assert call.id == written_call_id("run_1", 2, 0) and found.blocks == 1


def test_tool_call_arguments_as_a_json_string_as_parameters_or_left_out():
    found = recover(
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
        '<tool_call>{"name": "b", "parameters": {"y": 2}}</tool_call>'
        '<tool_call> {"name": "c"} </tool_call>'
        '<tool_call>{"name": "d", "arguments": "{not json"}</tool_call>'
    )
    assert [(c.name, c.arguments) for c in found.calls] == [
        ("a", '{"x": 1}'),
        ("b", '{"y": 2}'),
        ("c", "{}"),
        ("d", "{not json"),  # the policy refuses it: invalid_arguments
    ]
    assert found.text == ""


def test_the_seeds_invoke_block():
    found = recover('<invoke name="read_file">\n<parameter name="file_path">cmd/serve.go</parameter>\n</invoke>')
    [call] = found.calls
    assert (call.name, args(call), found.text) == ("read_file", {"file_path": "cmd/serve.go"}, "")


def test_invoke_values_are_json_unless_the_schema_says_string():
    found = recover(
        """Checking <invoke name='order_status'>
<parameter name="order_number">8812</parameter>
<parameter name="count"> 3 </parameter>
<parameter name="express">true</parameter>
<parameter name="tags">["a", "b"]</parameter>
<parameter name="note">null</parameter>
</invoke> now"""
    )
    [call] = found.calls
    assert args(call) == {"order_number": "8812", "count": 3, "express": True, "tags": ["a", "b"], "note": "null"}
    assert found.text == "Checking  now"


def test_invoke_values_of_unknown_tools_or_parameters_read_as_json_else_text():
    found = recover(
        '<invoke name="lookup"><parameter name="n">12</parameter><parameter name="q">Where is it?</parameter>'
        '<parameter name="s">"quoted"</parameter><parameter name="nan">NaN</parameter></invoke>'
    )
    assert args(found.calls[0]) == {"n": 12, "q": "Where is it?", "s": "quoted", "nan": "NaN"}
    # A string parameter written as a JSON string literal is the string it spells.
    [call] = recover('<invoke name="order_status"><parameter name="order_number">"8812"</parameter></invoke>').calls
    assert args(call) == {"order_number": "8812"}


def test_invoke_names_go_through_the_tools_aliases_for_the_schema():
    # "Order Status" is order_status to the policy (aliases ignore case and separators): its schema types the values.
    [call] = recover('<invoke name="Order Status"><parameter name="order_number">42</parameter></invoke>').calls
    assert call.name == "Order_Status" and args(call) == {"order_number": "42"}


def test_a_builtins_alias_and_argument_synonym_are_typed_as_what_they_mean():
    tool = builtins.get("transfer_to_human")
    assert tool is not None
    handoff = ToolSpec(tool.name, ToolKind.BUILTIN, tool.effect, "", tool.parameters)
    written = '<invoke name="handoff"><parameter name="message">42</parameter></invoke>'
    [call] = recover(written, tools=(handoff,)).calls
    assert args(call) == {"message": "42"}  # the handoff tool's "message" is its summary: a string


def test_self_closing_invoke_and_a_function_calls_wrapper():
    found = recover('Sure.\n<function_calls>\n<invoke name="get_cart"/>\n</function_calls>\nDone.')
    [call] = found.calls
    assert (call.name, call.arguments) == ("get_cart", "{}")
    assert found.text == "Sure.\n\n\n\nDone."


def test_ids_are_stable_per_run_round_and_place():
    text = '<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>'
    first, again = recover(text), recover(text)
    assert [c.id for c in first.calls] == [c.id for c in again.calls]
    assert len({c.id for c in first.calls}) == 2
    other_round = recover_written_calls(text, run_id="run_1", round_number=3)
    other_run = recover_written_calls(text, run_id="run_2", round_number=2)
    assert not {c.id for c in first.calls} & {c.id for c in other_round.calls + other_run.calls}
    assert all(c.id.startswith("call_text_") and len(c.id) <= 64 for c in first.calls)


def test_text_without_blocks_is_left_as_it_is():
    for text in ["", "Hello", "a < b, 3<4 <3 <b>bold</b> <invoked> <tool_calls> <toolcall>", "<", "x <- y", "<<<>>>"]:
        found = recover(text + "!")
        assert (found.text, found.calls, found.found) == (text + "!", (), False)


# --- blocks that can't be read: removed, and the model hears about them ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ('<tool_call>{"name": "order_status", "arguments": {order: 1}}</tool_call>', "order_status"),
        ("<tool_call>{'name': 'order_status'}</tool_call>", UNREADABLE_CALL_NAME),
        ("<tool_call>not json at all</tool_call>", UNREADABLE_CALL_NAME),
        ('<tool_call>{"arguments": {}}</tool_call>', UNREADABLE_CALL_NAME),
        ('<tool_call>["order_status", {}]</tool_call>', UNREADABLE_CALL_NAME),
        ('<tool_call>{"name": "!!!", "arguments": {}}</tool_call>', UNREADABLE_CALL_NAME),
        ("<tool_call></tool_call>", UNREADABLE_CALL_NAME),
        ("<tool_call/>", UNREADABLE_CALL_NAME),
        ('<tool_call>{"name": "order_status", "arguments": {"order_number": "8', "order_status"),  # cut off
        ('<tool_call name="x"', UNREADABLE_CALL_NAME),  # cut off inside the tag
        ('<invoke name="order_status"><parameter name="order_number">8812</invoke>', "order_status"),
        ('<invoke name="order_status"><parameter>8812</parameter></invoke>', "order_status"),
        (
            '<invoke name="order_status"><parameter name="a">1</parameter><parameter name="a">2</parameter></invoke>',
            "order_status",
        ),
        ('<invoke name="order_status"><parameters name="a">1</parameters></invoke>', "order_status"),
        ('<invoke><parameter name="a">1</parameter></invoke>', UNREADABLE_CALL_NAME),
        ('<invoke name="">x</invoke>', UNREADABLE_CALL_NAME),
        ('<invoke name="order_status"><parameter name="order_number">88', "order_status"),  # cut off
    ],
)
def test_an_unreadable_block_is_removed_and_its_call_is_refused_by_the_policy(text, name):
    found = recover(f"Before {text}")
    assert found.text == "Before "
    [call] = found.calls
    assert call.name == name
    # Whatever the tool set holds, these arguments never validate: the policy answers invalid_arguments (or
    # tool_not_available first, for a name no tool has).
    value, problem = parse_arguments(call.arguments)
    assert problem is not None or not isinstance(value, dict), call.arguments


def test_a_nameless_block_never_carries_arguments_a_tool_could_accept():
    nameless = (
        '<tool_call>{"arguments": {}}</tool_call>',
        '<invoke name="#"><parameter name="a">1</parameter></invoke>',
    )
    for text in nameless:
        [call] = recover(text).calls
        assert (call.name, call.arguments) == (UNREADABLE_CALL_NAME, UNREADABLE_ARGUMENTS)


def test_a_names_characters_are_made_what_providers_accept_back():
    [call] = recover('<tool_call>{"name": "' + "x y" * 40 + '"}</tool_call>').calls
    assert len(call.name) == 64 and set(call.name) <= set("xy_")


# --- bounds -----------------------------------------------------------------------------------------------------------


def test_at_most_twice_a_rounds_calls_are_recovered_the_rest_removed():
    assert MAX_WRITTEN_CALLS == 2 * MAX_CALLS_PER_ROUND
    text = "".join(f'<tool_call>{{"name": "t{n}"}}</tool_call> {n}' for n in range(MAX_WRITTEN_CALLS + 7))
    found = recover(text)
    assert [c.name for c in found.calls] == [f"t{n}" for n in range(MAX_WRITTEN_CALLS)]
    assert found.blocks == MAX_WRITTEN_CALLS + 7
    assert found.text == "".join(f" {n}" for n in range(MAX_WRITTEN_CALLS + 7))


def test_a_block_too_large_to_read_is_unreadable():
    big = "x" * MAX_BLOCK_CHARS
    [call] = recover(f'<tool_call>{{"name": "order_status", "arguments": {{"a": "{big}"}}}}</tool_call>').calls
    assert (call.name, call.arguments) == ("order_status", UNREADABLE_ARGUMENTS)
    [call] = recover(f'<invoke name="order_status"><parameter name="a">{big}</parameter></invoke>').calls
    assert (call.name, call.arguments) == ("order_status", UNREADABLE_ARGUMENTS)


HOSTILE = [
    "<" * 200_000,
    "<tool_call" * 50_000,
    "<tool_call>" * 50_000,
    "<invoke " * 50_000,
    '<invoke name="' * 50_000,
    '<invoke name="x">' + '<parameter name="' * 30_000,
    '<invoke name="x">' + '<parameter name="a">' * 30_000 + "</invoke>",
    "<tool_call>" + '"name": ' * 50_000 + "</tool_call>",
    "<tool_call>" + "[" * 50_000 + "</tool_call>",
    "<tool_call>" + '{"name": "a", "arguments": ' + "[" * 20_000 + "]" * 20_000 + "}</tool_call>",
    "</tool_call></invoke><function_calls>" * 20_000,
    "a<b " * 100_000,
    "name = " * 100_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_is_read_in_linear_time(text):
    started = time.monotonic()
    found = recover(text)
    stream = WrittenCallFilter()
    released = "".join(stream.feed(text[i : i + 7]) for i in range(0, len(text), 7)) + stream.close()
    assert released == found.text
    assert len(found.calls) <= MAX_WRITTEN_CALLS
    assert time.monotonic() - started < 5


# --- the incremental form ---------------------------------------------------------------------------------------------

SAMPLES = [
    'Let me check.\n<tool_call>{"name": "order_status", "arguments": {"order_number": "8812"}}</tool_call>\nDone.',
    'a<invoke name="x"><parameter name="p">v</parameter></invoke>b<invoke name="y"/>c',
    '<function_calls>\n<invoke name="get_cart">\n</invoke>\n</function_calls>\nok',
    "3 < 4 and <b>bold</b> <invoked> <tool_calls> </tool_callx> </invokes>",
    'truncated <tool_call>{"name": "x"',
    "ends on a tag's start </tool_ca",
    "ends on <invoke",
    "ends on <",
    "<tool_call><tool_call>x</tool_call></tool_call> tail",
    "<<tool_call>>x</tool_call>> <</invoke>>",
    '<invoke name="a>b"><parameter name="c">d</parameter></invoke> after',
]


@pytest.mark.parametrize("text", SAMPLES)
def test_split_at_every_position_releases_what_the_whole_text_shows(text):
    expected = recover(text).text
    for at in range(len(text) + 1):
        assert streamed([text[:at], text[at:]]) == expected, at
    assert streamed(list(text)) == expected


# Text made of the pieces blocks are made of, so that splits fall inside tags, names and closing tags.
CHARACTERS = tuple("<>/ \nax\"'={}")
TAGS = ("<tool_call", "<tool_call>", "</tool_call>", "tool_call", "<invoke", "<invoke ", "</invoke>", "invoke")
PARTS = (' name="x"', "<parameter", ' name="p">', "</parameter>", "<function_calls>", "</function_calls>")
CUT = ('{"name": "t", "arguments": {}}', "/>", "</", "</tool_c", "<inv")
PIECES = st.sampled_from(CHARACTERS + TAGS + PARTS + CUT)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(PIECES, max_size=40), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_split_releases_exactly_the_whole_texts_answer(pieces, cuts):
    text = "".join(pieces)
    expected = recover(text).text
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    stream = WrittenCallFilter()
    released = ""
    for chunk in chunks:
        released += stream.feed(chunk)
        assert expected.startswith(released)  # nothing released is ever taken back, so no block shows in part
    assert released + stream.close() == expected
    assert stream.blocks == recover(text).blocks


PLAIN = st.text(alphabet=st.characters(blacklist_characters="<"), max_size=30)
BLOCKS = st.sampled_from(
    [
        '<tool_call>{"name": "order_status", "arguments": {"order_number": "8812"}}</tool_call>',
        '<invoke name="read_file">\n<parameter name="file_path">a.go</parameter>\n</invoke>',
        '<invoke name="get_cart"/>',
        "<tool_call>broken</tool_call>",
        "<function_calls>",
        "</function_calls>",
    ]
)


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.tuples(PLAIN, BLOCKS), max_size=6), tail=PLAIN, data=st.data())
def test_what_is_shown_is_exactly_the_text_around_the_blocks(parts, tail, data):
    text = "".join(plain + block for plain, block in parts) + tail
    expected = "".join(plain for plain, _ in parts) + tail
    found = recover(text)
    assert found.text == expected
    assert len(found.calls) == sum(1 for _, block in parts if "function_calls" not in block)
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    assert streamed([text[:at], text[at:]]) == expected


def test_a_closed_filter_takes_no_more_text():
    stream = WrittenCallFilter()
    assert stream.feed("Hello <tool") == "Hello "
    assert stream.close() == ""  # what might have been a block is never shown
    with pytest.raises(ValueError, match="closed"):
        stream.feed("_call>")


def test_the_filter_holds_a_block_back_until_it_ends():
    stream = WrittenCallFilter()
    assert stream.feed("One moment <") == "One moment "
    assert stream.feed('tool_call>{"name": ') == ""
    assert stream.feed('"x"}</tool_') == ""
    assert stream.feed("call> then") == " then"
    assert stream.feed(" <b>ok</b>") == " <b>ok</b>"
    assert stream.blocks == 1
