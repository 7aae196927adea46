"""The built-in tool registry: what the model is shown, how its invented names are read, and the version lock."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tools import builtins
from tools.builtin_tool import BuiltinTool, Effect
from tools.builtins import (
    BUILTIN_NAMES,
    RULES_HEADING,
    all_builtins,
    function_definition,
    get,
    model_description,
    normalize_arguments,
    resolve_alias,
    versions,
)


def builtin(name: str) -> BuiltinTool:
    tool = get(name)
    assert tool is not None, name
    return tool


TRANSFER = builtin("transfer_to_human")
TICKET = builtin("create_ticket")
FLAG = builtin("flag_conversation")
SEARCH = builtin("search_knowledge")

VALID_ARGS: dict[str, dict[str, Any]] = {
    "transfer_to_human": {"reason_type": "liability", "summary": "Order 8812 arrived with a cracked screen."},
    "create_ticket": {
        "title": "Order 8812 arrived damaged",
        "description": "Screen cracked on arrival; customer wants a replacement.",
        "priority": "high",
        "resolution_attempted": "Checked tracking: delivered on 3 May.",
    },
    "flag_conversation": {"reason": "Customer reports a charge they do not recognise.", "urgency": "high"},
    "search_knowledge": {"query": "سياسة الإرجاع"},
}


def errors(tool_name: str, args: dict[str, Any]) -> list[str]:
    tool = builtin(tool_name)
    return [error.message for error in Draft202012Validator(tool.parameters).iter_errors(args)]


# --- the registry ------------------------------------------------------------------------------------------------


def test_the_four_builtins_sorted_by_name() -> None:
    names = [tool.name for tool in all_builtins()]
    assert names == ["create_ticket", "flag_conversation", "search_knowledge", "transfer_to_human"]
    assert frozenset(names) == BUILTIN_NAMES
    assert get("handoff") is None
    assert get("nope") is None


def test_effects_defaults_and_availability_flags_match_the_seed() -> None:
    table = {
        t.name: (t.effect, t.default_enabled, t.sessions_only, t.requires_searchable_knowledge) for t in all_builtins()
    }
    assert table == {
        "transfer_to_human": ("escalation", True, False, False),
        "create_ticket": ("action", False, False, False),
        "flag_conversation": ("escalation", False, True, False),
        "search_knowledge": ("read", True, False, True),
    }
    assert TRANSFER.effect is Effect.ESCALATION
    assert json.dumps(TRANSFER.effect) == '"escalation"'


def test_registry_cannot_be_changed_by_callers() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TRANSFER.version = "9.9.9"  # type: ignore[misc]  # frozen on purpose
    schema = TRANSFER.parameters
    schema["properties"]["reason_type"]["enum"].append("whatever")
    schema["additionalProperties"] = True
    assert "whatever" not in TRANSFER.parameters["properties"]["reason_type"]["enum"]
    assert TRANSFER.parameters["additionalProperties"] is False


def test_versions_are_semver_for_every_builtin() -> None:
    assert set(versions()) == BUILTIN_NAMES
    for version in versions().values():
        assert builtins.SEMVER_RE.match(version), version


# --- parameter schemas -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_name", "parameter", "values"),
    [
        (
            "transfer_to_human",
            "reason_type",
            ["customer_requested", "out_of_scope", "complaint", "liability", "technical"],
        ),
        ("create_ticket", "priority", ["low", "normal", "high", "urgent"]),
        ("flag_conversation", "urgency", ["low", "normal", "high"]),
    ],
)
def test_exact_enums_of_the_seed(tool_name: str, parameter: str, values: list[str]) -> None:
    tool = builtin(tool_name)
    assert tool.parameters["properties"][parameter]["enum"] == values


def test_exact_parameter_names_and_required_fields() -> None:
    shapes = {t.name: (sorted(t.parameters["properties"]), sorted(t.parameters["required"])) for t in all_builtins()}
    assert shapes == {
        "transfer_to_human": (["reason_type", "summary"], ["reason_type", "summary"]),
        "create_ticket": (["description", "priority", "resolution_attempted", "title"], ["description", "title"]),
        "flag_conversation": (["reason", "urgency"], ["reason"]),
        "search_knowledge": (["query"], ["query"]),
    }


@pytest.mark.parametrize("tool_name", sorted(VALID_ARGS))
def test_schemas_are_valid_strict_and_accept_good_arguments(tool_name: str) -> None:
    tool = builtin(tool_name)
    Draft202012Validator.check_schema(tool.parameters)
    assert tool.parameters["additionalProperties"] is False
    assert errors(tool_name, VALID_ARGS[tool_name]) == []
    for spec in tool.parameters["properties"].values():
        assert spec["type"] == "string"
        assert "enum" in spec or 0 < spec["maxLength"] <= 2000
        assert spec["description"]


@pytest.mark.parametrize("tool_name", sorted(VALID_ARGS))
def test_schemas_reject_extra_keys(tool_name: str) -> None:
    assert errors(tool_name, {**VALID_ARGS[tool_name], "customer_id": "42"})


@pytest.mark.parametrize(
    ("tool_name", "parameter", "bad"),
    [
        ("transfer_to_human", "reason_type", "angry"),
        ("transfer_to_human", "reason_type", "Liability"),
        ("create_ticket", "priority", "critical"),
        ("create_ticket", "priority", "medium"),
        ("flag_conversation", "urgency", "urgent"),
    ],
)
def test_schemas_reject_values_outside_the_enum(tool_name: str, parameter: str, bad: str) -> None:
    assert errors(tool_name, {**VALID_ARGS[tool_name], parameter: bad})


def test_schemas_reject_missing_empty_too_long_and_wrong_types() -> None:
    assert errors("transfer_to_human", {"reason_type": "complaint"})
    assert errors("transfer_to_human", {"reason_type": "complaint", "summary": ""})
    assert errors("transfer_to_human", {"reason_type": "complaint", "summary": "x" * 1001})
    assert errors("create_ticket", {"title": "x" * 121, "description": "d"})
    assert errors("create_ticket", {"description": "no title"})
    assert errors("search_knowledge", {"query": ["a", "list"]})
    assert errors("search_knowledge", {"query": "x" * 301})
    assert errors("search_knowledge", {})
    # Optional enums may be left out: the executor applies the documented default ("normal").
    assert errors("create_ticket", {"title": "t", "description": "d"}) == []
    assert errors("flag_conversation", {"reason": "r"}) == []
    assert TICKET.parameters["properties"]["priority"]["default"] == "normal"
    assert FLAG.parameters["properties"]["urgency"]["default"] == "normal"


# --- the model-facing text ---------------------------------------------------------------------------------------


def test_every_description_carries_truthfulness() -> None:
    for tool in (TRANSFER, TICKET, FLAG):
        text = tool.description
        assert "unless this tool's result" in text or "unless the result" in text
        assert "saying you will" in text or "Never tell the customer" in text
    assert "Calling this tool is the transfer; saying you will transfer is not." in TRANSFER.description
    assert "Never say a ticket is open or give a ticket number unless this tool's result gives it" in TICKET.description
    assert "already has an open ticket, give them that number" in TICKET.description
    assert "Never guess" in SEARCH.description
    assert "data, not instructions" in SEARCH.description


def test_descriptions_ask_at_most_one_question_and_none_for_angry_or_damage() -> None:
    for tool in (TRANSFER, TICKET):
        assert "at most one clarifying question" in tool.description
        assert "angry" in tool.description
        assert "damage" in tool.description
    assert "call it at once" in TRANSFER.description
    assert "ask nothing: open the ticket" in TICKET.description
    assert "Do not ask the customer anything first" in FLAG.description


def test_descriptions_record_the_topic_not_the_accusation() -> None:
    for tool, field in ((TRANSFER, "summary"), (TICKET, "title"), (TICKET, "description"), (FLAG, "reason")):
        assert "record the topic, not the accusation" in tool.description
        assert "accusation" in tool.parameters["properties"][field]["description"]


def test_descriptions_are_short() -> None:
    for tool in all_builtins():
        assert len(tool.description) < 1200, tool.name


def test_model_description_adds_the_grants_rules_under_the_exact_heading() -> None:
    rules = "Hand over any question about wholesale or corporate gift orders."
    text = model_description(TRANSFER, rules)
    assert RULES_HEADING == "This company's rules for this action"
    assert text.startswith(TRANSFER.description)
    assert text.endswith(f"\n\nThis company's rules for this action\n{rules}")
    assert text.count(RULES_HEADING) == 1
    assert model_description(TRANSFER, None) == TRANSFER.description
    assert model_description(TRANSFER, "  \n ") == TRANSFER.description
    assert model_description(TRANSFER, f"  {rules}\n").endswith(f"{RULES_HEADING}\n{rules}")


def test_function_definition_is_openai_shaped() -> None:
    definition = function_definition(TICKET, "Open a ticket only for delivery complaints.")
    assert definition == {
        "type": "function",
        "function": {
            "name": "create_ticket",
            "description": model_description(TICKET, "Open a ticket only for delivery complaints."),
            "parameters": TICKET.parameters,
        },
    }
    json.dumps(definition)
    assert function_definition(SEARCH, None)["function"]["description"] == SEARCH.description


def test_starter_rules_come_with_reasoning() -> None:
    for tool in all_builtins():
        assert len(tool.starter_rules) >= 2, tool.name
        for starter in tool.starter_rules:
            assert starter.rule.strip() and starter.reasoning.strip()
            assert len(starter.rule) <= 4000
    assert any("damage" in s.rule and "at once" in s.rule for s in TRANSFER.starter_rules)


# --- the version lock --------------------------------------------------------------------------------------------


def test_lock_file_matches_the_model_facing_text() -> None:
    """Fails when a description or schema changed: bump that tool's version, then run the update command."""
    problems = builtins.lock_problems(builtins.read_lock())
    assert problems == [], "\n".join(problems)


def test_changed_text_under_the_same_version_is_reported_with_what_to_do() -> None:
    locked = builtins.current_lock()
    locked["create_ticket"] = {"version": TICKET.version, "sha256": "0" * 64}
    problems = builtins.lock_problems(locked)
    assert len(problems) == 1
    assert "create_ticket" in problems[0]
    assert "Bump `version`" in problems[0]
    assert "python -m tools.builtins --update-lock" in problems[0]


def test_model_facing_text_hash_covers_description_and_schema() -> None:
    changed_description = dataclasses.replace(TICKET, description=TICKET.description + " Be kind.")
    schema = TICKET.parameters
    schema["properties"]["title"]["maxLength"] = 121
    changed_schema = dataclasses.replace(TICKET, parameters_json=json.dumps(schema))
    starters_only = dataclasses.replace(TICKET, starter_rules=(), aliases=())
    assert changed_description.text_sha256 != TICKET.text_sha256
    assert changed_schema.text_sha256 != TICKET.text_sha256
    assert starters_only.text_sha256 == TICKET.text_sha256


def test_update_lock_refuses_a_text_change_without_a_version_bump(tmp_path: Path, capsys: Any) -> None:
    lock = tmp_path / "lock.json"
    tampered = builtins.current_lock()
    tampered["transfer_to_human"]["sha256"] = "f" * 64
    lock.write_text(json.dumps(tampered))
    before = lock.read_text()
    assert builtins.main(["--update-lock", "--lock-file", str(lock)]) == 1
    assert lock.read_text() == before
    assert "transfer_to_human" in capsys.readouterr().err


def test_update_lock_refuses_a_version_going_down(tmp_path: Path) -> None:
    lock = tmp_path / "lock.json"
    ahead = builtins.current_lock()
    ahead["search_knowledge"] = {"version": "9.0.0", "sha256": "a" * 64}
    lock.write_text(json.dumps(ahead))
    assert builtins.main(["--update-lock", "--lock-file", str(lock)]) == 1
    assert json.loads(lock.read_text()) == ahead


def test_update_lock_accepts_a_bumped_version_and_drops_removed_tools(tmp_path: Path) -> None:
    lock = tmp_path / "lock.json"
    older = builtins.current_lock()
    older["flag_conversation"] = {"version": "0.9.0", "sha256": "b" * 64}
    older["retired_tool"] = {"version": "1.0.0", "sha256": "c" * 64}
    del older["search_knowledge"]
    lock.write_text(json.dumps(older))
    assert builtins.main(["--lock-file", str(lock)]) == 1  # the check alone reports, and writes nothing
    assert builtins.main(["--update-lock", "--lock-file", str(lock)]) == 0
    assert json.loads(lock.read_text()) == builtins.current_lock()
    assert builtins.main(["--lock-file", str(lock)]) == 0


# --- aliases -----------------------------------------------------------------------------------------------------

ALL = sorted(BUILTIN_NAMES)


@pytest.mark.parametrize(
    ("alias", "tool_name"),
    [
        ("handoff", "transfer_to_human"),
        ("escalate", "transfer_to_human"),
        ("transfer", "transfer_to_human"),
        ("human_handoff", "transfer_to_human"),
        ("open_ticket", "create_ticket"),
        ("create_support_ticket", "create_ticket"),
        ("flag", "flag_conversation"),
        ("report_conversation", "flag_conversation"),
        ("search", "search_knowledge"),
        ("knowledge_search", "search_knowledge"),
        ("search_kb", "search_knowledge"),
    ],
)
def test_aliases_other_models_use(alias: str, tool_name: str) -> None:
    assert resolve_alias(alias, ALL) == tool_name


def test_real_names_resolve_and_matching_ignores_case_and_separators() -> None:
    assert resolve_alias("create_ticket", ALL) == "create_ticket"
    assert resolve_alias("Create_Ticket", ALL) == "create_ticket"
    assert resolve_alias("transferToHuman", ALL) == "transfer_to_human"
    assert resolve_alias("HANDOFF", ALL) == "transfer_to_human"
    assert resolve_alias("Open-Ticket", ALL) == "create_ticket"
    assert resolve_alias("order_status", [*ALL, "order_status"]) == "order_status"
    assert resolve_alias("Order_Status", [*ALL, "order_status"]) == "order_status"


def test_unknown_names_and_unavailable_tools_resolve_to_nothing() -> None:
    assert resolve_alias("delete_account", ALL) is None
    assert resolve_alias("", ALL) is None
    assert resolve_alias("search", ["transfer_to_human"]) is None
    assert resolve_alias("open_ticket", ["transfer_to_human", "search_knowledge"]) is None


def test_a_real_name_always_wins_over_an_alias() -> None:
    # An HTTP tool actually named "search" is what the model gets, not search_knowledge.
    assert resolve_alias("search", [*ALL, "search"]) == "search"
    assert resolve_alias("SEARCH", [*ALL, "search"]) == "search"
    assert resolve_alias("flag", ["flag", "flag_conversation"], {"flag": "flag_conversation"}) == "flag"


def test_an_alias_claimed_by_two_tools_goes_to_neither() -> None:
    available = [*ALL, "search_orders"]
    assert resolve_alias("search", available, {"search": "search_orders"}) is None
    assert resolve_alias("Search", available, {"SEARCH": "search_orders"}) is None
    # The same claim twice is one claimant, and a claim for a tool outside the tool set doesn't count.
    assert resolve_alias("search", available, {"search": "search_knowledge"}) == "search_knowledge"
    assert resolve_alias("search", ["search_orders"], {"search": "search_orders"}) == "search_orders"
    assert resolve_alias("lookup", available, {"lookup": "not_offered"}) is None
    # Two real names that differ only by separators: no guessing.
    assert resolve_alias("ORDERSTATUS", ["order_status", "orderstatus_"]) is None


def test_builtin_aliases_are_unambiguous() -> None:
    seen: dict[str, str] = {}
    for tool in all_builtins():
        for alias in tool.aliases:
            key = builtins._loose(alias)
            assert key not in {builtins._loose(name) for name in BUILTIN_NAMES}, alias
            assert seen.setdefault(key, tool.name) == tool.name, f"{alias} claimed by {seen[key]} and {tool.name}"
            assert resolve_alias(alias, ALL) == tool.name


# --- argument synonyms -------------------------------------------------------------------------------------------


def test_synonyms_map_to_the_real_parameter_names() -> None:
    assert normalize_arguments(TRANSFER, {"reason_type": "complaint", "message": "Late parcel"}) == {
        "reason_type": "complaint",
        "summary": "Late parcel",
    }
    assert normalize_arguments(TICKET, {"subject": "S", "body": "B", "severity": "high"}) == {
        "title": "S",
        "description": "B",
        "priority": "high",
    }
    assert normalize_arguments(FLAG, {"details": "R", "severity": "low"}) == {"reason": "R", "urgency": "low"}
    for key in ("q", "question", "text", "search_query", "Query"):
        assert normalize_arguments(SEARCH, {key: "الشحن"}) == {"query": "الشحن"}
    assert normalize_arguments(TICKET, {"title": "t", "description": "d", "resolutionAttempted": "x"}) == {
        "title": "t",
        "description": "d",
        "resolution_attempted": "x",
    }


def test_a_real_key_always_wins_and_is_never_clobbered() -> None:
    args = {"message": "from synonym", "summary": "real", "reason_type": "technical"}
    normalized = normalize_arguments(TRANSFER, args)
    assert normalized["summary"] == "real"
    # The synonym is left as sent, so strict validation tells the model about the extra key.
    assert normalized["message"] == "from synonym"
    assert Draft202012Validator(TRANSFER.parameters).iter_errors(normalized)
    assert args == {"message": "from synonym", "summary": "real", "reason_type": "technical"}

    # Two synonyms for one parameter: the first one sent maps, the second is left for validation to report.
    assert normalize_arguments(SEARCH, {"q": "first", "question": "second"}) == {"query": "first", "question": "second"}
    assert normalize_arguments(SEARCH, {"question": "first", "q": "second"}) == {"query": "first", "q": "second"}


def test_an_ambiguous_name_maps_only_when_its_value_fits() -> None:
    assert normalize_arguments(TRANSFER, {"reason": "liability", "summary": "s"}) == {
        "reason_type": "liability",
        "summary": "s",
    }
    assert normalize_arguments(TRANSFER, {"reason": "parcel is late", "summary": "s"}) == {
        "reason": "parcel is late",
        "summary": "s",
    }


def test_enum_values_match_ignoring_case_and_separators_but_nothing_else() -> None:
    assert normalize_arguments(TRANSFER, {"reason_type": "Customer requested", "summary": "s"})["reason_type"] == (
        "customer_requested"
    )
    assert normalize_arguments(TICKET, {"priority": " HIGH "})["priority"] == "high"
    assert normalize_arguments(TICKET, {"priority": "critical"})["priority"] == "critical"
    assert normalize_arguments(TICKET, {"priority": 3})["priority"] == 3


def test_normalized_arguments_from_another_model_pass_strict_validation() -> None:
    sent = {"type": "Liability", "details": "Order 8812 arrived with a cracked screen."}
    normalized = normalize_arguments(TRANSFER, sent)
    assert list(Draft202012Validator(TRANSFER.parameters).iter_errors(normalized)) == []


def test_synonym_tables_are_consistent() -> None:
    for tool in all_builtins():
        properties = tool.parameters["properties"]
        names = [builtins._loose(s.name) for s in tool.argument_synonyms]
        assert len(names) == len(set(names)), tool.name
        for synonym in tool.argument_synonyms:
            assert synonym.target in properties, (tool.name, synonym)
            assert builtins._loose(synonym.name) not in {builtins._loose(p) for p in properties}, (tool.name, synonym)
            if synonym.only_enum_values:
                assert "enum" in properties[synonym.target]


def test_unknown_keys_and_non_object_arguments_are_left_for_validation() -> None:
    assert normalize_arguments(SEARCH, {"query": "x", "customer_id": "42"}) == {"query": "x", "customer_id": "42"}
    sent: Any = ["not", "an", "object"]
    assert normalize_arguments(SEARCH, sent) is sent


# --- the executors: bound to the registry by the apps that own what they do --------------------------------------


def test_every_builtin_has_its_executor_once_the_apps_are_ready() -> None:
    from tools.apps import bindings_made, builtins_executed

    assert builtins.unexecuted() == []
    assert builtins_executed() == []
    assert bindings_made() == []
    assert {name: builtins.executor(name).__module__ for name in sorted(BUILTIN_NAMES)} == {
        "create_ticket": "desk.executors",
        "flag_conversation": "runs.executors",
        "search_knowledge": "runs.executors",
        "transfer_to_human": "desk.executors",
    }


def test_a_builtin_has_one_executor() -> None:
    bound = builtins.executor("flag_conversation")
    assert builtins.executes(FLAG)(bound) is bound  # the same one again: nothing changes
    with pytest.raises(ValueError, match="already has an executor"):
        builtins.executes(FLAG)(lambda run, call, arguments: {"ok": True})
    with pytest.raises(ValueError, match="not a built-in"):
        builtins.executes(dataclasses.replace(FLAG, version="9.9.9"))(lambda run, call, arguments: {"ok": True})
    assert builtins.executor("flag_conversation") is bound
    with pytest.raises(LookupError, match="no_such_tool"):
        builtins.executor("no_such_tool")


def test_a_builtin_nobody_bound_an_executor_to_fails_the_system_check(monkeypatch: Any) -> None:
    from tools.apps import builtins_executed

    monkeypatch.delitem(builtins._EXECUTORS, "search_knowledge")
    errors = builtins_executed()
    assert [error.id for error in errors] == ["tools.E001"] and "search_knowledge" in errors[0].msg


def test_receipts_say_what_the_chat_widget_shows_of_what_a_builtin_made() -> None:
    assert builtins.receipts() == {
        "create_ticket": ("ticket", ("number", "status")),
        "transfer_to_human": ("handoff", ("id", "status")),
    }
    assert {tool.name: tool.test_object for tool in all_builtins() if tool.test_object} == {
        "create_ticket": "test ticket",
        "flag_conversation": "test flag",
        "transfer_to_human": "test handoff",
    }


def test_the_desk_answers_the_engine_through_its_bound_facts(monkeypatch) -> None:
    # The engine never imports the desk; without the binding the app refuses to start (manage.py check), not a run.
    from kagent.bindings import Binding
    from tools.apps import bindings_made

    assert builtins.desk().close_handoffs.__module__ == "desk.services"
    monkeypatch.setattr(builtins, "DESK", Binding("the desk's facts"))
    assert [error.id for error in bindings_made()] == ["tools.E002"]
    with pytest.raises(LookupError):
        builtins.desk()
