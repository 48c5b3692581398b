"""The UI-schema compiler: pure, every node type, and garbage in without an exception out.

No test here has database access: pytest-django would fail any that touched it."""

from typing import Any

import pytest

from agent_runs.ui_schema import (
    MAX_ACTIONS,
    MAX_BLOCKS,
    MAX_ITEMS,
    MAX_LABEL_CHARS,
    MAX_TEXT_CHARS,
    UiSchemaRenderer,
    ui_schema_build,
    ui_schema_compile,
)


def output(*blocks: Any, **fields: Any) -> dict[str, Any]:
    """An agent output whose ui_hints hold ``blocks`` (and no title, status or actions)."""
    agent_output: dict[str, Any] = {
        "answer": "done",
        "key_points": [],
        "result_type": "execution_report",
        "suggested_actions": [],
        "ui_hints": {"blocks": list(blocks)},
    }
    agent_output.update(fields)
    return agent_output


def compiled(agent_output: Any, **options: Any) -> dict[str, Any]:
    schema = ui_schema_compile(agent_output, **options)
    assert schema is not None
    return schema


def children(agent_output: Any, **options: Any) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = compiled(agent_output, **options)["root"]["children"]
    return nodes


def test_it_compiles_the_spec_example():
    agent_output = {
        "answer": "好的,我来帮您创建日程。",
        "status": "success",
        "ui_hints": {
            "appearance": "card",
            "title": "日程已创建",
            "blocks": [{"type": "text", "content": "您的会议日程创建成功", "role": "body"}],
        },
    }

    assert ui_schema_compile(agent_output, locale="zh-CN") == {
        "version": "2.0",
        "locale": "zh-CN",
        "status": "success",
        "theme": "default",
        "root": {
            "type": "stack",
            "appearance": "card",
            "children": [
                {"type": "text", "content": "日程已创建", "role": "title"},
                {"type": "badge", "label": "SUCCESS", "status": "success"},
                {"type": "text", "content": "您的会议日程创建成功", "role": "body"},
            ],
        },
    }


@pytest.mark.parametrize(
    ("run_status", "ui_status", "badge"),
    [
        ("success", "success", [{"type": "badge", "label": "SUCCESS", "status": "success"}]),
        (
            "partial_success",
            "warning",
            [{"type": "badge", "label": "PARTIAL_SUCCESS", "status": "warning"}],
        ),
        ("failed", "error", [{"type": "badge", "label": "FAILED", "status": "error"}]),
        ("exploded", "info", []),
        (None, "info", []),
        (["success"], "info", []),
    ],
)
def test_the_schema_status_and_badge_follow_the_run_status(run_status, ui_status, badge):
    schema = compiled(output({"type": "divider"}, status=run_status))

    assert schema["status"] == ui_status
    assert schema["root"]["children"] == [*badge, {"type": "divider"}]


@pytest.mark.parametrize("role", ["title", "body", "caption"])
def test_a_text_block_keeps_its_role(role):
    block = {"type": "text", "content": "  Saved  ", "role": role}

    assert children(output(block)) == [{"type": "text", "content": "Saved", "role": role}]


def test_a_text_block_without_a_known_role_is_body():
    blocks = [{"type": "text", "content": "a"}, {"type": "text", "content": "b", "role": "h1"}]

    assert [node["role"] for node in children(output(*blocks))] == ["body", "body"]


@pytest.mark.parametrize("status", ["info", "success", "warning", "error", "pending"])
def test_a_badge_block_keeps_its_status(status):
    block = {"type": "badge", "label": "Sync", "status": status}

    assert children(output(block)) == [{"type": "badge", "label": "Sync", "status": status}]


def test_a_badge_with_an_unknown_status_is_info():
    block = {"type": "badge", "label": "Sync", "status": "purple"}

    assert children(output(block)) == [{"type": "badge", "label": "Sync", "status": "info"}]


def test_a_list_block_keeps_its_text_items():
    block = {"type": "list", "items": ["Buy milk", 3, None, "", " Call Bob "]}

    assert children(output(block)) == [{"type": "list", "items": ["Buy milk", "Call Bob"]}]


def test_a_key_value_block_keeps_pairs_with_a_key_and_a_scalar_value():
    block = {
        "type": "key_value",
        "items": [
            {"key": "When", "value": "10:00"},
            {"key": "Guests", "value": 3},
            {"key": "Flag", "value": True},
            {"key": "", "value": "no key"},
            {"value": "no key"},
            "not a pair",
        ],
    }

    assert children(output(block)) == [
        {
            "type": "key_value",
            "items": [{"key": "When", "value": "10:00"}, {"key": "Guests", "value": "3"}],
        }
    ]


@pytest.fixture(autouse=True)
def _trusted_image_host(settings):
    settings.UI_SCHEMA_IMAGE_URL_PREFIXES = ["https://cdn.example.com/", "http://cdn.example.com/"]


def test_an_image_from_an_untrusted_place_is_dropped(settings):
    settings.UI_SCHEMA_IMAGE_URL_PREFIXES = ["https://agents.example.com/storage/v1/object/sign/"]
    blocks = [
        {"type": "image", "url": "https://evil.example.net/pixel.png?q=secret"},
        {"type": "image", "url": "https://agents.example.com/storage/v1/object/sign/b/p.png?t=1"},
    ]
    schema = ui_schema_compile({"status": "success", "ui_hints": {"blocks": blocks}})
    assert schema is not None
    images = [node for node in schema["root"]["children"] if node["type"] == "image"]
    assert [node["url"] for node in images] == [blocks[1]["url"]]


def test_an_image_block_keeps_an_http_url_and_its_alt():
    blocks = [
        {"type": "image", "url": "https://cdn.example.com/a.png", "alt": "A chart"},
        {"type": "image", "url": "http://cdn.example.com/b.png"},
    ]

    assert children(output(*blocks)) == [
        {"type": "image", "url": "https://cdn.example.com/a.png", "alt": "A chart"},
        {"type": "image", "url": "http://cdn.example.com/b.png", "alt": ""},
    ]


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "data:image/png;base64,AAAA",
        "/relative.png",
        "https://",
        "https://x/" + "a" * 3000,
        42,
        None,
    ],
)
def test_an_image_block_without_an_absolute_http_url_is_dropped(url):
    blocks = [{"type": "image", "url": url}, {"type": "divider"}]

    assert children(output(*blocks)) == [{"type": "divider"}]


def test_a_divider_block_is_a_divider_node():
    assert children(output({"type": "divider", "extra": "ignored"})) == [{"type": "divider"}]


def test_each_suggested_action_becomes_an_action_node():
    agent_output = output(
        suggested_actions=[
            {"label": "Add a reminder", "prompt": "Remind me 10 minutes before"},
            "Show my week",
            {"prompt": "Only a prompt"},
            {"label": "Only a label"},
            {"label": 5, "prompt": None},
            7,
        ]
    )

    assert children(agent_output) == [
        {
            "type": "action",
            "label": "Add a reminder",
            "action": {"type": "send_message", "prompt": "Remind me 10 minutes before"},
        },
        {
            "type": "action",
            "label": "Show my week",
            "action": {"type": "send_message", "prompt": "Show my week"},
        },
        {
            "type": "action",
            "label": "Only a prompt",
            "action": {"type": "send_message", "prompt": "Only a prompt"},
        },
        {
            "type": "action",
            "label": "Only a label",
            "action": {"type": "send_message", "prompt": "Only a label"},
        },
    ]


def test_the_root_stack_takes_the_hints_appearance_and_defaults_to_card():
    plain = output({"type": "divider"})
    plain["ui_hints"]["appearance"] = "plain"
    odd = output({"type": "divider"})
    odd["ui_hints"]["appearance"] = "carousel"

    assert compiled(plain)["root"]["appearance"] == "plain"
    assert compiled(odd)["root"]["appearance"] == "card"


@pytest.mark.parametrize("locale", ["en", "zh-CN", "pt-BR", "sr-Latn-RS"])
def test_it_keeps_a_well_formed_locale(locale):
    assert compiled(output({"type": "divider"}), locale=locale)["locale"] == locale


@pytest.mark.parametrize("locale", ["", "x" * 40, "en US", "<script>", None, 5])
def test_a_malformed_locale_becomes_en(locale):
    assert compiled(output({"type": "divider"}), locale=locale)["locale"] == "en"


@pytest.mark.parametrize(
    "agent_output",
    [
        None,
        {},
        {"answer": "no hints", "status": "success", "suggested_actions": ["Next"]},
        {"ui_hints": None, "status": "success"},
        {"ui_hints": "render me nicely"},
        {"ui_hints": ["text"]},
        {"ui_hints": 42},
        "a string",
        ["a", "list"],
        42,
    ],
)
def test_there_is_no_schema_without_ui_hints(agent_output):
    assert ui_schema_compile(agent_output) is None


def test_hints_with_nothing_to_show_compile_to_nothing():
    assert ui_schema_compile(output({"type": "unknown"}, {"type": "text", "content": " "})) is None


def test_malformed_blocks_are_dropped_and_the_valid_ones_kept():
    garbage: list[Any] = [
        None,
        1,
        "text",
        [],
        {},
        {"type": None},
        {"type": ["text"]},
        {"type": {"nested": "dict"}},
        {"type": "carousel", "items": ["a"]},
        {"type": "stack", "children": [{"type": "text", "content": "nested"}]},
        {"type": "text"},
        {"type": "text", "content": 5},
        {"type": "text", "content": ["a"]},
        {"type": "badge"},
        {"type": "badge", "label": {"x": 1}},
        {"type": "list", "items": "abc"},
        {"type": "list", "items": [None, 1, {}]},
        {"type": "key_value", "items": {"key": "a", "value": "b"}},
        {"type": "key_value", "items": [{"key": "big", "value": 10**5000}]},
        {"type": "image"},
        {"type": "TEXT", "content": "wrong case"},
    ]
    agent_output = output(*garbage, {"type": "text", "content": "kept"}, status="success")
    agent_output["ui_hints"]["title"] = ["not", "a", "title"]
    agent_output["suggested_actions"] = {"label": "not a list"}

    assert children(agent_output) == [
        {"type": "badge", "label": "SUCCESS", "status": "success"},
        {"type": "text", "content": "kept", "role": "body"},
    ]


@pytest.mark.parametrize(
    "hints",
    [
        {"blocks": "not a list"},
        {"blocks": None, "title": None, "appearance": None},
        {"blocks": {"type": "text", "content": "a dict, not a list"}},
        {"title": "", "blocks": []},
        {1: "non-string key", "blocks": [{1: 2}]},
    ],
)
def test_malformed_hints_never_raise(hints):
    agent_output = {"status": "success", "ui_hints": hints}

    assert children(agent_output) == [{"type": "badge", "label": "SUCCESS", "status": "success"}]


def test_huge_inputs_are_capped():
    agent_output = output(
        *([{"type": "list", "items": ["item"] * 10_000}] * 10_000),
        suggested_actions=["Next"] * 1_000,
    )
    agent_output["ui_hints"]["title"] = "T" * 100_000
    agent_output["ui_hints"]["blocks"].insert(0, {"type": "text", "content": "x" * 1_000_000})

    nodes = children(agent_output)

    title, text, *blocks = nodes[: 2 + MAX_BLOCKS - 1]
    assert len(title["content"]) == MAX_LABEL_CHARS
    assert len(text["content"]) == MAX_TEXT_CHARS
    assert len(nodes) == 1 + MAX_BLOCKS + MAX_ACTIONS  # the title, the blocks, the actions
    assert all(len(block["items"]) == MAX_ITEMS for block in blocks)
    assert [node["type"] for node in nodes[-MAX_ACTIONS:]] == ["action"] * MAX_ACTIONS


def test_the_compiled_schema_validates_as_a_ui_schema_renderer():
    agent_output = output(
        {"type": "text", "content": "Body", "role": "body"},
        {"type": "badge", "label": "New", "status": "pending"},
        {"type": "list", "items": ["a", "b"]},
        {"type": "key_value", "items": [{"key": "k", "value": "v"}]},
        {"type": "image", "url": "https://cdn.example.com/a.png", "alt": "A"},
        {"type": "divider"},
        status="partial_success",
        suggested_actions=["Retry"],
    )

    schema = compiled(agent_output)
    built = ui_schema_build(agent_output)

    assert built is not None
    assert UiSchemaRenderer.model_validate(schema).to_wire() == schema == built.to_wire()
    assert [node["type"] for node in schema["root"]["children"]] == [
        "badge",
        "text",
        "badge",
        "list",
        "key_value",
        "image",
        "divider",
        "action",
    ]
