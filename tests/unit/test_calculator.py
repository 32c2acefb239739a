"""calculator: Jianmu's strings, the string schema, and bounded work without eval."""

from __future__ import annotations

import asyncio

import pytest

from tests.calls import user_call
from toold.tools import ToolSet
from toold.tools.builtin.calculator import CalculatorTool


@pytest.fixture
def calc() -> CalculatorTool:
    return CalculatorTool()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2+2", "4"),
        ("7/2", "3.5"),
        ("7//2", "3"),
        ("7 % 4", "3"),
        ("2**10", "1024"),
        ("-(3 - 5) * +2", "4"),
        (" (1.5 + 2.5) * 3 ", "12.0"),
        ("2**-1", "0.5"),
        ("2**3**2", "512"),
    ],
)
def test_arithmetic(calc: CalculatorTool, expression: str, expected: str) -> None:
    assert calc.run(expression) == expected


@pytest.mark.parametrize("expression", ["abc", "__import__('os')", "2+x", "1e5", "[1]", "a=1"])
def test_whitelist_refuses_anything_else(calc: CalculatorTool, expression: str) -> None:
    assert calc.run(expression) == f"Error: Only math expressions allowed, got: {expression}"


def test_division_by_zero_is_the_python_message(calc: CalculatorTool) -> None:
    assert calc.run("1/0") == "Error: division by zero"
    assert calc.run("1%0") == "Error: integer modulo by zero"


def test_syntax_errors_are_error_results(calc: CalculatorTool) -> None:
    assert calc.run("1 2").startswith("Error: invalid syntax")
    assert calc.run("((1)").startswith("Error: '(' was never closed")
    assert calc.run("").startswith("Error: ")


def test_whitelisted_but_not_arithmetic(calc: CalculatorTool) -> None:
    assert calc.run("()") == "Error: unsupported expression: ()"


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "bomb",
    ["9**9**9", "(10**10)**(10**10)", "2**100001", "(10**20000)*(10**20000)", "(9**99999)**9"],
)
def test_exponent_bombs_are_refused_before_computing(calc: CalculatorTool, bomb: str) -> None:
    assert calc.run(bomb) == "Error: result too large (more than 30,103 digits)"


def test_big_but_bounded_results_still_work(calc: CalculatorTool) -> None:
    assert calc.run("2**1000") == str(2**1000)
    assert calc.run("(10**4000) // (10**3999)") == "10"
    assert calc.run("1**(10**10)") == "1"
    assert calc.run("(0-1)**(10**10+1)") == "-1"


def test_float_overflow_is_an_error(calc: CalculatorTool) -> None:
    assert calc.run("10.0**400").startswith("Error: ")


def test_deep_nesting_is_an_error(calc: CalculatorTool) -> None:
    assert calc.run("-" * 5000 + "1").startswith("Error: ")


def test_schema_is_jianmu_string_wrapped_as_input() -> None:
    tool = CalculatorTool()
    assert tool.input_schema == {
        "type": "string",
        "description": "Python math expression, e.g. '2+2'",
    }
    assert tool.parameters() == {
        "type": "object",
        "properties": {"input": tool.input_schema},
        "required": ["input"],
    }


def test_bare_string_and_input_object_both_work() -> None:
    tools = ToolSet.resolve(["calculator"])
    assert asyncio.run(user_call(tools, "calculator", "6*7")).content == "42"
    assert asyncio.run(user_call(tools, "calculator", {"input": "6*7"})).content == "42"


def test_a_number_is_taken_as_its_expression(calc: CalculatorTool) -> None:
    assert calc.run(12) == "12"


def test_the_input_length_is_capped_before_parsing(calc: CalculatorTool) -> None:
    from toold.tools.builtin.calculator import MAX_INPUT_CHARS

    answer = calc.run("1+" * 8_000_000 + "1")
    assert answer.startswith("Error: expression too long (16,000,001 characters")
    assert f"at most {MAX_INPUT_CHARS:,}" in answer
    assert not calc.run("1" * MAX_INPUT_CHARS).startswith("Error: expression too long")


def test_long_flat_sums_do_not_need_recursion(calc: CalculatorTool) -> None:
    assert calc.run("+".join(["1"] * 1500)) == "1500"
    assert calc.run("-".join(["1"] * 1500)) == str(1 - 1499)


def test_a_refused_expression_is_not_echoed_whole(calc: CalculatorTool) -> None:
    assert len(calc.run("x" * 9000)) < 300


def test_a_misnamed_argument_is_named() -> None:
    tools = ToolSet.resolve(["calculator"])
    outcome = asyncio.run(user_call(tools, "calculator", {"expression": "1+2"}))
    assert outcome.is_error
    assert outcome.content == (
        "Error: invalid arguments for calculator: expression: unexpected argument; give the "
        'string as input, e.g. {"input": ...}'
    )
    assert asyncio.run(user_call(tools, "calculator", {"input": "1+2"})).content == "3"
