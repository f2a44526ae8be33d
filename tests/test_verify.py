"""Answer extraction, answer checking (quick path and math-verify workers), and rewards."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentdata.verify import (
    CorrectnessReward,
    OverlongReward,
    VerifierPool,
    answers_match,
    extra_call_penalty,
    extract_answer,
    is_correct,
    overlong_penalty,
    tool_call_reward,
)
from agentdata.verify.quick import quick_verdict

# --------------------------------------------------------------------------- extraction

EXTRACTION_CASES = [
    (r"So the answer is \boxed{42}.", "42"),
    (r"First \boxed{1}, then corrected: \boxed{2}", "2"),
    (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
    (r"$\boxed{\frac{\sqrt{3}}{2}}$", r"\frac{\sqrt{3}}{2}"),
    (r"\boxed{\{1, 2, 3\}}", r"\{1, 2, 3\}"),
    (r"\boxed{\left\{ x \right.}", r"\left\{ x \right."),
    (r"$\boxed 7$", "7"),
    (r"the value is \boxed 12 units", "12"),
    (r"\fbox{C}", "C"),
    (r"\boxed{ (1, 2] }", "(1, 2]"),
    (r"\boxed{\text{(B)}}", r"\text{(B)}"),
    (r"unclosed \boxed{5 and earlier \boxed{3}", "3"),
    ("Answer: 17", "17"),
    ("Some work.\nThe final answer is $\\frac{3}{4}$.", r"\frac{3}{4}"),
    ("The answer is 9.", "9"),
    ("**Answer:** 12", "12"),
    (r"Answer: 3 but boxed wins \boxed{4}", "4"),
]


@pytest.mark.parametrize(("text", "expected"), EXTRACTION_CASES)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", ["", None, "I am not sure.", r"\boxed{}", r"\boxedsomething", r"\boxed{unclosed"])
def test_extract_answer_none(text):
    assert extract_answer(text) is None


# --------------------------------------------------------------------------- checking

CORRECT = [
    # numbers
    ("42", r"\boxed{42}"),
    ("-7", r"\boxed{-7}"),
    ("1000", r"\boxed{1,000}"),
    ("10", r"\boxed{10.0}"),
    ("0.25", r"\boxed{\frac{1}{4}}"),
    (r"\frac{1}{2}", r"\boxed{0.5}"),
    (r"\frac{1}{2}", r"\boxed{1/2}"),
    (r"\frac{1}{2}", r"\boxed{\dfrac{1}{2}}"),
    (r"-\frac{3}{4}", r"\boxed{\frac{-3}{4}}"),
    (r"\frac{1}{3}", r"\boxed{0.333333}"),
    ("50", r"\boxed{50\%}"),
    ("90", r"\boxed{90^\circ}"),
    # expressions
    (r"2\sqrt{2}", r"\boxed{\sqrt{8}}"),
    (r"\frac{\sqrt{3}}{2}", r"\boxed{\sin(\pi/3)}"),
    (r"\frac{\pi}{2}", r"\boxed{\pi/2}"),
    ("x^2+2x+1", r"\boxed{(x+1)^2}"),
    (r"\sqrt{2}/2", r"\boxed{\frac{1}{\sqrt{2}}}"),
    ("2+3i", r"\boxed{3i+2}"),
    (r"\infty", r"\boxed{\infty}"),
    (r"e^{2}", r"\boxed{e^2}"),
    ("3", r"\boxed{x=3}"),
    (r"\binom{5}{2}", r"\boxed{10}"),
    ("120", r"\boxed{5!}"),
    # sets, intervals, tuples, matrices
    ("(1, 2]", r"\boxed{(1,2]}"),
    (r"[0, \infty)", r"\boxed{[0,\infty)}"),
    (r"\{1,2,3\}", r"\boxed{\{3,2,1\}}"),
    (r"\{1,2\}", r"\boxed{1, 2}"),
    ("(1, 2)", r"\boxed{(1,2)}"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}"),
    # text answers
    (r"\text{Tuesday}", r"\boxed{\text{Tuesday}}"),
    # multiple-choice letters (GPQA style)
    ("C", r"\boxed{C}"),
    ("C", r"\boxed{(C)}"),
    ("C", r"\boxed{\text{C}}"),
    ("C", r"\boxed{\textbf{C}}"),
    ("(B)", r"\boxed{B}"),
    ("A", r"\boxed{A) 42}"),
    # gold given as a full solution
    (r"We find \boxed{12}.", r"\boxed{12}"),
    # answers without a box (documented fallback)
    ("17", "Answer: 17"),
    (r"\frac{3}{4}", "The final answer is $\\frac{3}{4}$."),
]

WRONG = [
    ("42", r"\boxed{43}"),
    ("-7", r"\boxed{7}"),
    ("1000", r"\boxed{100}"),
    (r"\frac{1}{2}", r"\boxed{0.6}"),
    (r"\frac{1}{2}", r"\boxed{\frac{1}{3}}"),
    (r"\frac{1}{3}", r"\boxed{0.33}"),
    (r"2\sqrt{2}", r"\boxed{\sqrt{2}}"),
    ("x^2+2x+1", r"\boxed{(x-1)^2}"),
    ("(1, 2]", r"\boxed{[1,2)}"),
    (r"\{1,2,3\}", r"\boxed{\{1,2\}}"),
    (r"[0, \infty)", r"\boxed{(0,\infty)}"),
    ("C", r"\boxed{D}"),
    ("C", r"\boxed{(A)}"),
    ("C", r"\boxed{42}"),
    (r"\pi", r"\boxed{3.14}"),
    ("5", r"\boxed{x=6}"),
    ("12", r"\boxed{\text{twelve apples}}"),
]

MISSING = [
    ("42", ""),
    ("42", "I think it is forty-two but I am not sure"),
    ("42", r"\boxed{}"),
    ("42", None),
    ("C", "Let me compute this with code first."),
]


@pytest.mark.parametrize(("gold", "response"), CORRECT)
def test_correct_answers(gold, response):
    assert is_correct(response, gold) is True


@pytest.mark.parametrize(("gold", "response"), WRONG)
def test_wrong_answers(gold, response):
    assert is_correct(response, gold) is False


@pytest.mark.parametrize(("gold", "response"), MISSING)
def test_missing_answers(gold, response):
    assert is_correct(response, gold) is False


def test_at_least_sixty_checking_cases():
    assert len(CORRECT) + len(WRONG) + len(MISSING) >= 60


@pytest.mark.parametrize(
    ("answer", "gold", "verdict"),
    [
        ("42", "42", True),
        ("42", "41", False),
        ("1,000", "1000", True),
        ("0.5", r"\frac{1}{2}", True),
        ("0.5", r"\frac{1}{3}", False),
        ("(C)", "C", True),
        ("x+1", "1+x", None),  # symbolic: math-verify decides
        (r"\frac{1}{3}", "0.3333333", None),  # a near tie: math-verify's rounding decides
    ],
)
def test_quick_verdict_settles_plain_cases_and_defers_others(answer, gold, verdict):
    assert quick_verdict(answer, gold) is verdict


def test_empty_gold_is_never_matched():
    assert answers_match("1", "") is False


def test_quick_path_is_fast():
    start = time.perf_counter()
    for index in range(2000):
        is_correct(rf"so \boxed{{{index}}}", str(index))
    per_check = (time.perf_counter() - start) / 2000
    assert per_check < 1e-3


# --------------------------------------------------------------------------- robustness


def test_checks_from_many_threads_agree_with_serial_results():
    cases = [(gold, response, True) for gold, response in CORRECT] + [(g, r, False) for g, r in WRONG]
    cases = cases * 4
    with ThreadPoolExecutor(max_workers=16) as executor:
        results = list(executor.map(lambda case: is_correct(case[1], case[0]), cases))
    assert results == [expected for _, _, expected in cases]


def test_pathological_input_is_cut_by_the_time_limit():
    pool = VerifierPool(size=1)
    try:
        pool.warm_up()
        start = time.perf_counter()
        assert pool.check("5", "9^{9^{9^{9}}}", timeout_s=1.0) is False
        assert time.perf_counter() - start < 3.0
        assert pool.timeouts == 1
        # the killed worker is replaced and the pool keeps working
        assert pool.check(r"2\sqrt{2}", r"\sqrt{8}", timeout_s=30.0) is True
    finally:
        pool.close()


def test_pathological_input_through_is_correct_returns_false_in_bound():
    start = time.perf_counter()
    assert is_correct(r"\boxed{9^{9^{9^{9}}}+x}", "7", timeout_s=1.0) is False
    assert time.perf_counter() - start < 5.0  # includes a worker start on a loaded machine


def _check_in_child(case: tuple[str, str]) -> bool:
    return is_correct(case[1], case[0])


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_checks_from_worker_processes(start_method):
    import multiprocessing

    is_correct(r"\boxed{\sqrt{8}}", r"2\sqrt{2}")  # the parent's workers exist before the fork
    cases = [(r"2\sqrt{2}", r"\boxed{\sqrt{8}}"), ("(1, 2]", r"\boxed{[1,2)}"), (r"\{1,2\}", r"\boxed{\{2,1\}}")]
    # multiprocessing.Pool workers are daemonic: they may not use multiprocessing children
    with multiprocessing.get_context(start_method).Pool(2) as pool:
        assert pool.map(_check_in_child, cases) == [True, False, True]


@pytest.mark.parametrize(
    "response", [r"\boxed{\frac{1}{", r"\boxed{)(}", r"\boxed{\\\\}", "\\boxed{\x00}", r"\boxed{" + "(" * 500 + "}"]
)
def test_malformed_answers_are_wrong_not_errors(response):
    is_correct(r"\boxed{x+1}", r"x^2+1")  # the workers exist: the bound is for one check, not their start
    start = time.perf_counter()
    assert is_correct(response, r"x^2+1", timeout_s=2.0) is False
    assert time.perf_counter() - start < 6.0  # the limit, plus a worker restart on a loaded machine


# --------------------------------------------------------------------------- rewards


@pytest.mark.parametrize(
    ("rounds", "expected"), [(0, -1.0), (1, -0.9), (2, -0.8), (3, -0.7), (4, -0.6), (5, -0.6), (20, -0.6)]
)
def test_tool_call_reward_for_wrong_answers(rounds, expected):
    assert tool_call_reward(False, rounds) == pytest.approx(expected)


def test_tool_call_reward_gives_no_bonus_to_correct_answers():
    assert tool_call_reward(True, 0) == tool_call_reward(True, 7) == 1.0


def test_extra_call_penalty():
    assert extra_call_penalty(2, free_calls=3, penalty_per_call=0.1) == 0.0
    assert extra_call_penalty(5, free_calls=3, penalty_per_call=0.1) == pytest.approx(-0.2)


@pytest.mark.parametrize(
    ("length", "expected"), [(0, 0.0), (6000, 0.0), (6001, -0.25 / 1000), (6500, -0.125), (7000, -0.25), (8000, -0.25)]
)
def test_overlong_penalty_dapo_formula(length, expected):
    # max_len 7000, buffer 1000 -> penalty ramps from 0 at 6000 to -0.25 at 7000
    assert overlong_penalty(length, max_len=7000, buffer=1000, penalty=0.25) == pytest.approx(expected)


def test_correctness_reward_trl_signature_with_strings_and_messages():
    reward = CorrectnessReward()
    conversational = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "code_interpreter", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": r"\boxed{5}"},  # tool output is never read as the answer
        {"role": "assistant", "content": r"So \boxed{4}."},
    ]
    scores = reward(prompts=[None] * 3, completions=[r"\boxed{5}", conversational, "no idea"], answer=["5", "4", "4"])
    assert scores == [1.0, 1.0, -1.0]
    assert reward.__name__ == "correctness"


def test_correctness_reward_zero_one_scale_and_missing_gold():
    reward = CorrectnessReward(correct_reward=1.0, wrong_reward=0.0)
    assert reward([None, None], [r"\boxed{1}", r"\boxed{2}"], answer=["1", ""]) == [1.0, None]
    assert reward([None], [r"\boxed{3}"], answer=["1"]) == [0.0]
    with pytest.raises(ValueError):
        reward([None], ["x"])


def test_correctness_reward_with_tool_call_reward_and_extra_call_penalty():
    calls = "<tool_call>{}</tool_call>"
    wrong_three_rounds = f"{calls} {calls} {calls} \\boxed{{9}}"
    tcr = CorrectnessReward(use_tool_call_reward=True)
    assert tcr([None], [wrong_three_rounds], answer=["1"]) == [pytest.approx(-0.7)]
    penalised = CorrectnessReward(free_calls=1, penalty_per_extra_call=0.05)
    assert penalised([None], [f"{calls} {calls} {calls} \\boxed{{1}}"], answer=["1"]) == [pytest.approx(0.9)]
    with pytest.raises(ValueError):
        CorrectnessReward(use_tool_call_reward=True, wrong_reward=0.0)


def test_overlong_reward_prefers_model_token_counts():
    reward = OverlongReward(max_len=100, buffer=20)
    assert reward(None, ["a", "b"], model_token_counts=[50, 90], completion_ids=[[0] * 100] * 2) == [0.0, -0.5]
    assert reward(None, ["a"], completion_ids=[[0] * 100]) == [-1.0]
    with pytest.raises(ValueError):
        OverlongReward(max_len=10, buffer=20)


@pytest.mark.parametrize(
    "text, gold",
    [
        ("so \\boxed{42}", "42"),
        ("so \\boxed{41}", "42"),
        ("no answer here", "42"),
        ("\\boxed{(C)}", "C"),
        ("\\boxed{\\frac{1}{2}}", "0.5"),
        ("\\boxed{x^2 + 1}", "1 + x^2"),  # only math-verify can tell: left to grade
    ],
)
def test_quick_grade_is_grade_where_it_decides(text, gold):
    from agentdata.records import Problem
    from agentdata.verify.grade import grade, quick_grade

    problem = Problem("q", gold)
    quick = quick_grade(problem, text)
    if quick is not None:
        assert quick == grade(problem, text)
    else:
        assert "x^2" in text
    assert quick_grade(Problem("q", "assert f() == 1", domain="code"), "```python\ndef f(): return 1\n```") is None
