"""Parsers agents' output goes through (python/tumorboard/harness/parsing.py).

Expected values are worked out by hand from the formats' definitions: MTBBench's harness
(``neurips25/models/agent_with_tools.py``: last ``[ANSWER: ...]`` tag; valid when the content's
first character is a letter a-f followed by ``)``, ``]`` or a space, or is a lone letter; grading
compares first characters; the strike rules of the re-prompt loop), ReAct's Thought / Action /
Observation blocks and RadA-BenchPlat's <Call>/<EndCall>/<NoCall> blocks.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tumorboard.harness import (
    AnswerProtocol,
    ConchCall,
    FileRequest,
    ReActStep,
    answer_letter,
    mtbbench_correct,
    mtbbench_valid,
    parse_answer,
    parse_answers,
    parse_conch,
    parse_options,
    parse_rada_calls,
    parse_react,
    parse_requests,
    split_requests,
)

OPTS = (
    "A) Adenocarcinoma, non-keratinizing",
    "B) Squamous cell carcinoma, non-keratinizing",
    "C) Squamous cell carcinoma, keratinizing",
    "D) Small-cell neuroendocrine carcinoma",
)


def mtbbench_rule(content: str) -> bool:
    """MTBBench's acceptance condition, written out from the reference harness."""
    r = content.strip()
    return (len(r) >= 2 and r[0].lower() in "abcdef" and r[1] in [")", "]", " "]) or (
        len(r) == 1 and r[0].lower() in "abcdef"
    )


# ----------------------------------------------------------------------------- answers

ANSWER_CASES = [
    # (response, options, letter, form, valid)
    ("[ANSWER: C]", None, "C", "tag", True),
    ("[ANSWER: C) Squamous cell carcinoma, keratinizing]", OPTS, "C", "tag", True),
    (
        "Reasoning... [ANSWER: A) x] then I changed my mind [answer: d) small]",
        None,
        "D",
        "tag",
        True,
    ),
    ("[ANSWER: b] trailing text", None, "B", "tag", True),
    ("[ANSWER: (B) Squamous]", OPTS, "B", "tag", False),
    ("[ANSWER: **C**]", None, "C", "tag", False),
    ("[ANSWER: C. Squamous cell]", None, "C", "tag", False),
    ("[ANSWER: the answer is D]", None, "D", "phrase", False),
    ("[ANSWER: Squamous cell carcinoma, keratinizing]", OPTS, "C", "option_text", False),
    ("[ANSWER: squamous cell carcinoma keratinising]", OPTS, "C", "option_text", False),
    ("[ANSWER: Squamous cell carcinoma]", OPTS, None, "none", False),  # B and C tie
    ("[ANSWER: C) unclosed", None, "C", "tag", False),  # unclosed tag: not valid for MTBBench
    ("C) Squamous cell carcinoma, keratinizing", OPTS, "C", "bare", True),
    ("c]", None, "C", "bare", True),
    ("  d  ", None, "D", "bare", True),
    ("(B) Squamous", OPTS, "B", "bare", False),
    ("A patient with a keratinizing tumour", OPTS, None, "none", True),  # the article, not A
    ("A Adenocarcinoma, non-keratinizing", OPTS, "A", "bare", True),  # letter + its own text
    ("The final answer is: B.", None, "B", "phrase", False),
    ("I would pick option C here", None, "C", "phrase", False),
    ("Small-cell neuroendocrine carcinoma", OPTS, "D", "option_text", False),
    ("G) nothing", None, None, "none", False),
    ("", None, None, "none", False),
]


@pytest.mark.parametrize("response,options,letter,form,valid", ANSWER_CASES)
def test_parse_answer_on_tricky_strings(response, options, letter, form, valid):
    ans = parse_answer(response, options=options)
    assert (ans.letter, ans.form, ans.valid) == (letter, form, valid)


def test_parse_answer_details():
    ans = parse_answer("[ANSWER: C) Squamous cell carcinoma, keratinizing]")
    assert ans.text == "Squamous cell carcinoma, keratinizing"
    assert ans.raw == "C) Squamous cell carcinoma, keratinizing"
    assert parse_answer(None).letter is None
    # tag content as stored in MTBBench logs: "B No" is choice B, "A patient" is A
    assert parse_answer("B No", tag_content=True).letter == "B"
    assert parse_answer("A patient", tag_content=True).letter == "A"
    assert parse_answer("B No").letter is None
    # options given as plain texts get letters in order
    assert (
        parse_answer("keratinizing carcinoma", options=["adeno", "keratinizing carcinoma"]).letter
        == "B"
    )
    # fuzzy matching can be switched off
    assert (
        parse_answer("squamous cell carcinoma keratinising", options=OPTS, fuzzy=None).letter
        is None
    )
    # letters restricts the choices
    assert parse_answer("[ANSWER: E]", letters="ABCD").letter is None
    with pytest.raises(TypeError, match="response"):
        parse_answer(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "content",
    ["C", "c", "C)", "C] x", "C x", "Cx", "G)", "", " ", "(C)", "C.", "ab", "f ", "F)", "1)"],
)
def test_valid_flag_follows_the_mtbbench_rule(content):
    assert mtbbench_valid(content) == mtbbench_rule(content)
    assert parse_answer(f"[ANSWER: {content}]").valid == mtbbench_rule(content)


def test_mtbbench_grading_compares_first_characters():
    assert mtbbench_correct("C) Squamous", "C) Squamous cell carcinoma") is True
    assert mtbbench_correct("c", "C) x") is True
    assert mtbbench_correct("The answer is C", "C) x") is False  # 'T' != 'C', as in MTBBench
    assert mtbbench_correct("  B) No", "A) Yes") is False
    assert mtbbench_correct(None, "A") is None
    assert mtbbench_correct("  ", "A") is None


def test_answer_letter_and_options():
    assert answer_letter("C) Squamous") == "C"
    assert answer_letter("(B) No") == "B"
    assert answer_letter("B") == "B"
    assert answer_letter("Yes") is None
    question = (
        "Which marker?\nA) CD3  \nB) CD8  \nC) CD56\n\n---\n\n### Combined H&E and IHC-Based "
        "Questions"
    )
    assert parse_options(question) == ("A) CD3", "B) CD8", "C) CD56")
    assert parse_options("Is there infiltration of CD8+ T cells?") == ()
    # a second list restarting at A replaces the first (examples before the real options)
    assert parse_options("e.g. A) foo B) bar\nA) one\nB) two") == ("A) one", "B) two")
    # a gap in the letters ends the list
    assert parse_options("A) one\nB) two\nD) four") == ("A) one", "B) two")


_ALPHABET = st.sampled_from(
    [
        "[ANSWER:",
        "[answer: ",
        "]",
        "[",
        "A",
        "b",
        "C",
        "d)",
        "(",
        ")",
        " ",
        "\n",
        "*",
        "x",
        "answer is ",
        "Squamous",
        ".",
        ":",
        "A) ",
        "G",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_ALPHABET, max_size=12).map("".join), min_size=1, max_size=8), st.booleans()
)
def test_batch_parser_equals_scalar_parser(responses, tag_content):
    options = [OPTS if i % 2 else None for i in range(len(responses))]
    batch = parse_answers(responses, options=options, tag_content=tag_content)
    scalar = [
        parse_answer(r, options=o, tag_content=tag_content).letter
        for r, o in zip(responses, options, strict=True)
    ]
    assert batch == scalar


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_ALPHABET, max_size=12).map("".join) | st.none(), min_size=1, max_size=6),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_batch_parser_reads_repeated_responses_once_with_the_same_letters(
    responses, tag_content, rng
):
    # each response three times, shuffled: the batch parser reads each distinct one once
    many = responses * 3
    rng.shuffle(many)
    options = [OPTS if i % 3 else None for i in range(len(many))]
    batch = parse_answers(many, options=options, tag_content=tag_content)
    scalar = [
        None if r is None else parse_answer(r, options=o, tag_content=tag_content).letter
        for r, o in zip(many, options, strict=True)
    ]
    assert batch == scalar


def test_batch_parser_handles_nulls_and_checks_lengths():
    assert parse_answers(["[ANSWER: a]", None, "c]"]) == ["A", None, "C"]
    with pytest.raises(ValueError, match="options: expected 2 entries"):
        parse_answers(["A", "B"], options=[None])


# ----------------------------------------------------------------------------- requests


def test_parse_requests():
    text = (
        "I need [REQUEST: PrimaryTumor_HE_104.jpg] and [request: a.png, b .png , 'c.png'] "
        "and again [REQUEST: a.png]"
    )
    assert parse_requests(text) == ["PrimaryTumor_HE_104.jpg", "a.png", "b.png", "c.png"]
    available = [
        "TMA_IHC_TumorCenter_CD3_0.png",
        "TMA_IHC_TumorCenter_CD3_1.png",
        "TMA_IHC_InvasionFront_CD3_0.png",
        "blood.json",
    ]
    assert parse_requests("[REQUEST: TMA_IHC_TumorCenter_CD3_*.png]", available=available) == [
        "TMA_IHC_TumorCenter_CD3_0.png",
        "TMA_IHC_TumorCenter_CD3_1.png",
    ]
    assert parse_requests("[REQUEST: *_CD3_?.png, blood.json]", available=available) == [
        "TMA_IHC_TumorCenter_CD3_0.png",
        "TMA_IHC_TumorCenter_CD3_1.png",
        "TMA_IHC_InvasionFront_CD3_0.png",
        "blood.json",
    ]
    # a pattern matching nothing is kept (it will count as hallucinated)
    assert parse_requests("[REQUEST: *.tif]", available=available) == ["*.tif"]
    assert parse_requests("no tags here") == []


def test_split_requests():
    available = ["a.png", "b.png", "c.jpg"]
    split = split_requests(["a.png", "zz.png", "*.png", "a.png", "c .jpg"], available)
    assert split == FileRequest(accessed=("a.png", "b.png", "c.jpg"), hallucinated=("zz.png",))
    with pytest.raises(TypeError, match="single string"):
        split_requests("a.png", available)  # type: ignore[arg-type]


def test_parse_conch():
    text = (
        "Let me check. [CONCH: Primary Tumor_HE.jpg, (Adenocarcinoma (NOS)), (Squamous cell "
        "carcinoma, keratinizing)] and [CONCH: LymphNode.jpg, (tumor), (no tumor)]"
    )
    assert parse_conch(text) == [
        ConchCall(
            "PrimaryTumor_HE.jpg", ("Adenocarcinoma (NOS)", "Squamous cell carcinoma, keratinizing")
        ),
        ConchCall("LymphNode.jpg", ("tumor", "no tumor")),
    ]
    assert parse_conch("[CONCH: a.jpg]") == [ConchCall("a.jpg", ())]
    assert parse_conch("nothing") == []


# ----------------------------------------------------------------------------- ReAct

REACT = """Question: Is CD8 higher in the invasion front?
A) Yes
B) No
Thought 1: I should look at the IHC
quantification first.
Action 1: ihc_positive_percentage
Action Input 1: {"image": "TMA_IHC_InvasionFront_CD8_0.png"}
Observation 1: 18.6% positive
**Thought:** compare with the tumour center
Act 2: Lookup[TumorCenter CD8]
Obs 2: Error: file not found
Observation: retried, 11.6% positive
Thought: front > center
Action: Finish[A]
"""


def test_parse_react():
    trace = parse_react(REACT)
    assert trace.question == "Is CD8 higher in the invasion front?\nA) Yes\nB) No"
    assert trace.final_answer == "A"
    assert trace.steps == (
        ReActStep(
            thought="I should look at the IHC\nquantification first.",
            action="ihc_positive_percentage",
            action_input='{"image": "TMA_IHC_InvasionFront_CD8_0.png"}',
            observation="18.6% positive",
        ),
        ReActStep(
            "compare with the tumour center", "Lookup", "TumorCenter CD8", "Error: file not found"
        ),
        ReActStep(observation="retried, 11.6% positive"),
        ReActStep("front > center", "Finish", "A", None),
    )


def test_parse_react_final_answer_forms():
    assert parse_react("Thought: done\nFinal Answer: B) No").final_answer == "B) No"
    assert parse_react("Thought: x\n[ANSWER: C]").final_answer == "C"
    empty = parse_react("just prose, no markers")
    assert empty.steps == () and empty.final_answer is None and empty.question is None


# ----------------------------------------------------------------------------- RadA-BenchPlat


def test_parse_rada_calls():
    text = (
        "<Call>\n  <Purpose>Segment the liver</Purpose>\n  <Tool>TOOL3</Tool>\n"
        "  <Input>['$CT_image$', '$organ$']</Input>\n</Call>\n"
        "<EndCall><Purpose>Write the report</Purpose><Tool>TOOL9</Tool>"
        "<Input>['$mask$']</Input></EndCall>"
        "<NoCall><Purpose>Quantify a biomarker</Purpose><Category>Biomarker Quantifier"
        "</Category><Anatomy>Universal</Anatomy><Modality>Universal</Modality>"
        "<Ability>CategoryMissing</Ability></NoCall>"
        "<Call><Tool>TOOL5</Tool><Input>not a list</Input>"  # unclosed at the end
    )
    calls = parse_rada_calls(text)
    assert [c.kind for c in calls] == ["call", "end_call", "no_call", "call"]
    assert calls[0].tool == "TOOL3" and calls[0].purpose == "Segment the liver"
    assert calls[0].inputs == ("$CT_image$", "$organ$")
    assert calls[1].inputs == ("$mask$",)
    assert calls[2].fields["Category"] == "Biomarker Quantifier"
    assert calls[2].fields["Ability"] == "CategoryMissing" and calls[2].inputs is None
    assert calls[3].tool == "TOOL5" and calls[3].inputs is None


# ----------------------------------------------------------------------------- protocol


def _run(messages, **kw):
    proto = AnswerProtocol(**kw)
    return [proto.step(m).kind for m in messages]


def test_protocol_follows_mtbbench_strikes():
    # neither request nor answer: re-prompted twice, the third such message fails
    assert _run(["hmm", "hmm", "hmm"]) == ["reprompt", "reprompt", "fail"]
    # malformed answers: three re-prompts, the next answer fails even if valid
    assert _run(["[ANSWER: maybe]"] * 3 + ["[ANSWER: C]"]) == ["reprompt"] * 3 + ["fail"]
    # a valid answer after two strikes is accepted
    assert _run(["hmm", "[ANSWER: x]", "[ANSWER: B) No]"]) == ["reprompt", "reprompt", "answer"]
    # the same request twice in a row is not served again: it counts as a strike
    assert _run(["[REQUEST: a.png]", "[REQUEST: a.png]", "[REQUEST: b.png]", "[ANSWER: A]"]) == [
        "request",
        "reprompt",
        "request",
        "answer",
    ]
    # CONCH calls are tool turns only when tools are on
    assert _run(["[CONCH: a.jpg, (x), (y)]", "[ANSWER: A]"], tools=True) == ["tool", "answer"]
    assert _run(["[CONCH: a.jpg, (x), (y)]"], tools=False) == ["reprompt"]


def test_protocol_turn_contents_and_end():
    proto = AnswerProtocol(options=OPTS)
    turn = proto.step("[REQUEST: a.png, b.png]")
    assert turn.requests == ("a.png", "b.png") and turn.strikes == 0
    turn = proto.step("[ANSWER: C) Squamous]")
    assert turn.kind == "answer" and turn.answer is not None and turn.answer.letter == "C"
    with pytest.raises(RuntimeError, match="ended"):
        proto.step("[ANSWER: C]")
    with pytest.raises(ValueError, match="max_strikes"):
        AnswerProtocol(max_strikes=0)
