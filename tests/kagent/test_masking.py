"""The one masking function: a secret is hidden in whatever spelling an upstream echoes it."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from kagent.masking import MASK, decoded_view, mask_secret, mask_secrets

SECRET = "tok/abc-1234567890"


def test_last_four_only_for_long_values() -> None:
    assert mask_secret("abcdefghijklmnop") == "••••mnop"
    assert mask_secret("short") == MASK


def test_plain_percent_and_json_forms() -> None:
    assert mask_secrets(f"key={SECRET}!", [SECRET]) == "key=••••7890!"
    assert mask_secrets("/x/" + quote(SECRET, safe=""), [SECRET]) == "/x/••••7890"
    assert mask_secrets("/x/" + quote(SECRET, safe="").lower(), [SECRET]) == "/x/••••7890"
    assert mask_secrets(json.dumps({"k": SECRET}), [SECRET]) == '{"k": "••••7890"}'
    assert mask_secrets('{"k":"a\\"b/c d"}', ['a"b/c d']) == '{"k":"••••"}'
    assert mask_secrets("/x/a%2Fb", ["a/b"]) == "/x/••••"


def test_json_escapes_an_upstream_may_choose() -> None:
    escaped_slash = SECRET.replace("/", "\\/")
    assert SECRET not in mask_secrets(f'{{"t":"{escaped_slash}"}}', [SECRET])
    assert mask_secrets(f'{{"t":"{escaped_slash}"}}', [SECRET]) == '{"t":"••••7890"}'
    every_char = "".join(f"\\u{ord(c):04x}" for c in SECRET)
    assert mask_secrets(f'"{every_char}"', [SECRET]) == '"••••7890"'
    upper = "".join(f"\\u{ord(c):04X}" for c in SECRET)
    assert mask_secrets(upper, [SECRET]) == "••••7890"


def test_surrogate_pairs_and_non_ascii() -> None:
    secret = "ключ-😀-секрет-42"
    assert mask_secrets(json.dumps(secret), [secret]) == '"••••т-42"'
    assert mask_secrets(quote(secret, safe=""), [secret]) == "••••т-42"


def test_overlapping_secrets_leave_nothing_visible() -> None:
    masked = mask_secrets("xxabcdefghyy", ["abcdef", "efgh"], replacement="****")
    assert masked == "xx****yy"


def test_fixed_replacement_and_nothing_to_mask() -> None:
    assert mask_secrets(f"a {SECRET} b", [SECRET], replacement="****") == "a **** b"
    assert mask_secrets("nothing here", [SECRET]) == "nothing here"
    assert mask_secrets("", [SECRET]) == ""
    assert mask_secrets("text", ["", None]) == "text"  # type: ignore[list-item]


def test_broken_escapes_are_kept_as_text() -> None:
    text = "\\u12 %G1 %4 \\x"
    decoded, starts, ends = decoded_view(text)
    assert decoded == text
    assert len(starts) == len(ends) == len(text)


def test_linear_on_hostile_text() -> None:
    secret = "a" * 8192
    text = ("a" * 8191 + "b") * 128  # 1 MiB of near misses
    started = time.monotonic()
    assert mask_secrets(text, [secret]) == text
    escaped = "\\u0061" * 100_000
    assert MASK in mask_secrets(escaped, ["a" * 50])
    assert time.monotonic() - started < 20  # generous: a quadratic version takes minutes


@given(
    secret=st.text(min_size=4, max_size=24).filter(lambda s: s.strip()),
    prefix=st.text(max_size=10),
    suffix=st.text(max_size=10),
    spellings=st.lists(
        st.sampled_from(["plain", "json", "json_all", "percent", "hidden", "hidden_json", "html", "htmlx", "wide"]),
        min_size=24,
        max_size=24,
    ),
)
def test_no_spelling_of_the_secret_survives(secret: str, prefix: str, suffix: str, spellings: list[str]) -> None:
    def spell(char: str, how: str) -> str:
        if how == "json":
            return json.dumps(char)[1:-1]
        if how == "json_all":
            return "".join(f"\\u{unit:04x}" for unit in _utf16_units(char))
        if how == "percent":
            return quote(char, safe="")
        if how == "hidden":  # an invisible character after it: the cleaning of what the model sees removes it
            return char + "\u200b"
        if how == "hidden_json":
            return char + "\\u2060\\u202e"
        if how == "html":
            return f"&#{ord(char)};"
        if how == "htmlx":
            return f"&#X{ord(char):X};"
        if how == "wide" and "!" <= char <= "~":
            return chr(ord(char) + 0xFEE0)
        return char

    echoed = "".join(spell(c, spellings[i]) for i, c in enumerate(secret))
    masked = mask_secrets(prefix + echoed + suffix, [secret])
    assert secret not in decoded_view(masked)[0]


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def test_invisible_characters_do_not_hide_a_secret() -> None:
    # Issue #13, finding 5: cleaning removes zero-width and bidi characters from what the model sees, so a secret
    # split by them must be masked too, as a character or as its JSON escape.
    for spelled in ("to\u200bk_live_0123456789", "tok_li\u2060ve_0123\ufe0f456789", "to\\u200bk_live_0123456789"):
        assert mask_secrets(f"x {spelled} y", ["tok_live_0123456789"]) == "x ••••6789 y", spelled
    assert mask_secrets("a\u200bb", ["\u200b"]) == "a\u200bb"  # a secret of nothing visible is no secret


def test_linear_on_hidden_characters() -> None:
    started = time.monotonic()
    assert MASK in mask_secrets("\u200b" * 300_000 + "tok_live_0123456789", ["tok_live_0123456789"])
    assert MASK in mask_secrets("\\u200b" * 150_000 + "tok_live_0123456789", ["tok_live_0123456789"])
    assert time.monotonic() - started < 20


def test_the_second_reviews_spellings() -> None:
    """Item 5: upper-cased, base64 (alone, inside a Basic authorization, at any alignment, URL-safe), hex, HTML
    character references (decimal, hexadecimal, named), fullwidth."""
    import base64

    secret = "sk_live_4f9a8b7c6d5e"
    raw = secret.encode()
    spellings = {
        "upper": secret.upper(),
        "base64": base64.b64encode(raw).decode(),
        "basic": base64.b64encode(b"user:" + raw).decode(),
        "base64 inside": base64.b64encode(b"ab" + raw + b"c").decode(),
        "url-safe": base64.urlsafe_b64encode(b"\xff\xfe" + raw).decode(),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "html": "".join(f"&#{ord(c)};" for c in secret),
        "html hex": "".join(f"&#x{ord(c):x};" for c in secret),
        "named": secret.replace("_", "&lowbar;"),
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) for c in secret),
    }
    for how, spelled in spellings.items():
        masked = mask_secrets(f'{{"echo": "{spelled}"}}', [secret])
        assert MASK in masked, how
        assert spelled not in masked, how
    # Ordinary text with ampersands and wide characters is left as it is.
    text = "Tom &amp; Jerry &#169; 2026 — ＡＢＣ & co"
    assert mask_secrets(text, [secret]) == text


def test_an_encoded_form_too_short_to_be_told_from_text_is_not_searched() -> None:
    # "abc" in hex is "616263": a six-digit number in a body must not be masked for it.
    assert mask_secrets("order 616263 shipped", ["abc"]) == "order 616263 shipped"
