"""Knowledge text, without a database: the search terms (one function for indexing and querying), the splitting of
sources into passages, an API response made into text, and what the model is shown of the hits."""

from __future__ import annotations

import json

import pytest

from agents.knowledge.index import Hit, tsvector_literal
from agents.knowledge.passages import MAX_WORDS, split_text
from agents.knowledge.results import search_result
from agents.knowledge.rows import rows_text
from agents.knowledge.terms import porter_stem, query_terms, terms
from tools.shaping import DATA_NOTICE, MAX_RESULT_BYTES, ShapingError

# --- terms ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("سِيَاسَةُ الإِرْجَاعِ", "سياسة الإرجاع"),  # diacritics
        ("الإرجـــاع", "الإرجاع"),  # tatweel
        ("إرجاع أسبوع آخر", "ارجاع اسبوع اخر"),  # alef forms
        ("مستشفى", "مستشفي"),  # alef maqsura / yaa
        ("الفاتورة", "الفاتوره"),  # taa marbuta / haa
        ("مسؤول", "مسوول"),  # hamza on waw
        ("٣٠ يوماً و۱۴ ساعة", "30 يوما و14 ساعه"),  # Arabic-Indic and extended digits
        ("SHIPPING Costs", "shipping costs"),
    ],
)
def test_spelling_variants_give_the_same_terms(written: str, plain: str) -> None:
    assert terms(written) == terms(plain)
    assert terms(written)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("الشحن", "شحن"),  # the article
        ("والشحن", "شحن"),  # conjunction + article
        ("بالبطاقة", "بطاقة"),  # preposition + article
        ("للعملاء", "العملاء"),
        ("لطلبك", "طلب"),  # preposition + pronoun suffix
        ("بطاقتي", "البطاقة"),  # taa marbuta before a pronoun
        ("منتجاتنا", "المنتج"),  # plural + pronoun
        ("دفعت", "الدفع"),  # a verb's subject suffix
        ("أحول", "تحويل"),  # verb and noun of one root
        ("أرجع", "الإرجاع"),
        ("استرجاع", "ارجاع"),
        ("العطور", "عطر"),  # a broken plural
        ("shipped", "shipping"),
        ("refunds", "refunded"),
        ("instalments", "installment"),  # British and American spelling
        ("package", "parcel"),  # the shop's synonyms
    ],
)
def test_inflected_forms_share_a_term(one: str, other: str) -> None:
    assert set(terms(one)) & set(terms(other)), (terms(one), terms(other))


def test_stop_words_and_noise_are_not_terms() -> None:
    assert terms("what is the, how do I?") == []
    assert terms("هل ما هو كيف في من على") == []
    assert terms("a" * 60) == []  # not a word: a hash, base64
    assert query_terms("refund refund refunded") == ["refund", "refunded"]
    assert "30" in terms("٣٠يوماً") and "يوم" in terms("٣٠يوماً")  # digits and letters apart


def test_porter_stemmer_matches_the_published_examples() -> None:
    examples = {
        "caresses": "caress",
        "ponies": "poni",
        "agreed": "agre",
        "motoring": "motor",
        "hopping": "hop",
        "filing": "file",
        "relational": "relat",
        "generalizations": "gener",
        "adjustment": "adjust",
        "controll": "control",
    }
    assert {word: porter_stem(word) for word in examples} == examples


def test_tsvector_literal_weights_title_terms() -> None:
    assert tsvector_literal(["ship"], ["ship", "fee"]) == "'ship':1A,2 'fee':3"


# --- passages -------------------------------------------------------------------------------------------------------


def test_split_by_headings_with_their_trail() -> None:
    content = (
        "# Returns\n\nIntro about **returns**, see [the policy](https://example.com/p).\n\n"
        "## Refunds\nRefunds go back to the card.\n\n"
        "Exchanges\n---------\n\nNo exchanges.\n\n"
        "**Can I return a gift?**\nYes, with the gift receipt.\n\n"
        "```\n# not a heading\n```\n"
    )
    drafts = split_text(source_title="Help", content=content)
    assert [(d.title, d.text) for d in drafts] == [
        ("Help › Returns", "Intro about returns, see the policy."),
        ("Help › Returns › Refunds", "Refunds go back to the card."),
        ("Help › Returns › Exchanges", "No exchanges."),
        ("Help › Returns › Exchanges › Can I return a gift?", "Yes, with the gift receipt.\n\n# not a heading"),
    ]


def test_a_heading_equal_to_the_source_title_is_not_repeated() -> None:
    drafts = split_text(source_title="الشحن والتوصيل", content="# الشحن والتوصيل\n\n## الرسوم\n٢٥ ريالاً")
    assert [d.title for d in drafts] == ["الشحن والتوصيل › الرسوم"]


def test_long_sections_are_cut_into_passages_of_a_few_hundred_words() -> None:
    sentence = "Orders placed before noon leave the warehouse the same day. "
    content = "# Long\n\n" + "\n\n".join(sentence * 12 for _ in range(20)) + "\n\n" + "word " * 1000
    drafts = split_text(source_title="Doc", content=content)
    assert len(drafts) > 5
    assert all(d.words <= MAX_WORDS for d in drafts)
    assert all(d.title == "Doc › Long" for d in drafts)
    assert sum(d.words for d in drafts) == len(content.split()) - 2  # nothing lost but the heading


def test_text_without_headings_is_split_by_paragraphs() -> None:
    paragraphs = [f"Paragraph {n} " + "about points " * 60 for n in range(6)]
    drafts = split_text(source_title="Rewards", content="\n\n".join(paragraphs))
    assert len(drafts) >= 3 and {d.title for d in drafts} == {"Rewards"}
    assert drafts[0].text.startswith("Paragraph 0")


# --- API rows -------------------------------------------------------------------------------------------------------


def test_rows_become_sections_with_the_first_field_as_heading() -> None:
    body = json.dumps(
        {
            "data": {
                "faqs": [
                    {"q": "How long is the warranty?", "a": "Two years.\u202e", "id": 1},
                    {"q": "Do you ship to Oman?", "a": "Yes, in 5 to 8 days.", "tags": ["ship", "gcc"]},
                    {"q": "no answer"},
                ]
            }
        }
    ).encode()
    config = {"items_path": "data.faqs", "fields": [{"path": "q", "label": "Question"}, {"path": "a", "label": "A"}]}
    text, count = rows_text(body=body, response_config=config)
    assert count == 3
    assert text == (
        "## How long is the warranty?\nQuestion: How long is the warranty?\nA: Two years.\n\n"
        "## Do you ship to Oman?\nQuestion: Do you ship to Oman?\nA: Yes, in 5 to 8 days.\n\n"
        "## no answer\nQuestion: no answer"
    )
    assert [d.title for d in split_text(source_title="FAQ", content=text)] == [
        "FAQ › How long is the warranty?",
        "FAQ › Do you ship to Oman?",
        "FAQ › no answer",
    ]
    with pytest.raises(ShapingError):
        rows_text(body=b"<html>", response_config=config)


# --- what the model sees --------------------------------------------------------------------------------------------


def hit(n: int, text: str, title: str = "Returns › Refunds") -> Hit:
    return Hit(passage_id=n, source_id=f"ks_{n}", title=title, text=text, score=1.0)


def test_results_are_marked_as_data_and_cleaned() -> None:
    result = search_result([hit(1, "Refunds take\u200b 5\u202e days.\nCards only.")], query_terms("refund"))
    assert result == {
        "ok": True,
        "data": {
            "notice": DATA_NOTICE,
            "tool": "search_knowledge",
            "results": [
                {"title": "Returns › Refunds", "passage": "Refunds take 5 days. Cards only.", "source": "ks_1"}
            ],
        },
    }
    empty = search_result([], ["x"])
    assert empty["data"]["results"] == [] and "don't know" in empty["data"]["message"]


def test_results_stay_under_4_kib_showing_the_sentences_that_match() -> None:
    filler = "تصل الطلبات إلى جميع المدن خلال أيام العمل المعتادة. " * 40
    answer = "يمكن إرجاع المنتج خلال ٣٠ يوماً من الاستلام."
    hits = [hit(1, filler + answer + " " + filler), hit(2, filler), hit(3, filler)]
    result = search_result(hits, query_terms("إرجاع المنتج"))
    size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())
    assert size < MAX_RESULT_BYTES
    results = result["data"]["results"]
    assert [r["source"] for r in results] == ["ks_1", "ks_2", "ks_3"]
    assert answer in results[0]["passage"] and results[0]["passage"].startswith("…")


def test_whole_results_are_dropped_when_titles_leave_no_room() -> None:
    hits = [hit(n, "x " * 300, title="T" * 200 + str(n)) for n in range(1, 21)]
    result = search_result(hits, ["x"])
    data = result["data"]
    assert 0 < len(data["results"]) < 20 and data["results_omitted"] == 20 - len(data["results"])
    assert len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()) < MAX_RESULT_BYTES


# --- hostile content: headings, bold lines and links are read in linear time ---------------------------------------

HOSTILE_LINES = [
    "#" + " " * 30_000 + "x",  # a heading whose closing run never comes
    "# title" + " \t" * 15_000 + "#x",
    "**" + "a" * 150 + " " * 30_000 + "x",  # a bold line that isn't one
    "**a**" + " " * 30_000 + ":x",
    "![" * 30_000,  # images that never close
    "[" * 20_000 + "]" * 20_000,  # brackets with no target
    "[a](" * 20_000,  # links whose target never ends
    "[a]" * 20_000,
]


@pytest.mark.parametrize("line", HOSTILE_LINES, ids=range(len(HOSTILE_LINES)))
def test_splitting_hostile_markdown_finishes_in_linear_time(line: str) -> None:
    import time

    started = time.monotonic()
    split_text(source_title="t", content=line + "\n" + line)
    assert time.monotonic() - started < 5  # generous: the quadratic expressions these replaced took minutes


def test_headings_bold_lines_and_links_still_read_as_before() -> None:
    content = (
        "# Returns #\n\nReturn within 30 days.\n\n"
        "  ## Refunds\n\nCard refunds take 5 days. See [the policy](https://x.test/p) and ![a box](b.png).\n\n"
        "**Do you ship abroad?**:\n\nYes, to the Gulf.\n\n"
        "####### not a heading\n\n#nospace is text\n"
    )
    passages = split_text(source_title="Help", content=content)
    titles = [p.title for p in passages]
    assert any("Returns › Refunds" in t for t in titles)
    assert any("Do you ship abroad?" in t for t in titles)
    text = " ".join(p.text for p in passages)
    assert "the policy" in text and "https://x.test" not in text and "a box" in text and "b.png" not in text
    assert "####### not a heading" in text and "#nospace is text" in text
