"""calculator: Jianmu's arithmetic tool, evaluated from the syntax tree instead of eval().

Only numbers, ``+ - * / // % **``, unary signs and parentheses are evaluated, and
every operation whose result could be huge is sized before it runs, so ``9**9**9``
answers at once with an error instead of holding a thread for hours.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any, ClassVar

from toold.tools.base import Tool

ALLOWED_CHARS = frozenset("0123456789+-*/().% ")
MAX_INT_BITS = 100_000
"""Largest integer (in bits) any step may produce."""
MAX_DIGITS = int(MAX_INT_BITS * 0.30103)

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class CalculationError(ValueError):
    """An expression the calculator refuses to evaluate."""


def _check_size(op: type[ast.operator], left: Number, right: Number) -> None:
    """Refuse integer operations whose result would exceed MAX_INT_BITS."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return  # float arithmetic is bounded: it overflows or rounds at once
    if op is ast.Mult:
        bits = left.bit_length() + right.bit_length()
    elif op is ast.Pow:
        if right < 0 or abs(left) <= 1:
            return
        # |left| >= 2 adds at least one bit per unit of exponent: clamp before multiplying.
        bits = (left.bit_length() - 1) * min(right, MAX_INT_BITS + 1)
    else:
        return
    if bits > MAX_INT_BITS:
        raise CalculationError(f"result too large (more than {MAX_DIGITS:,} digits)")


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        _check_size(type(node.op), left, right)
        result: Number = _BINARY[type(node.op)](left, right)
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        unary: Number = _UNARY[type(node.op)](_evaluate(node.operand))
        return unary
    raise CalculationError(f"unsupported expression: {ast.unparse(node) or type(node).__name__}")


def calculate(expression: str) -> Number:
    """Evaluate an arithmetic expression (already checked against ALLOWED_CHARS)."""
    tree = ast.parse(expression.strip(), filename="<string>", mode="eval")
    return _evaluate(tree)


class CalculatorTool(Tool):
    name = "calculator"
    description = (
        "Performs basic math calculations: numbers, + - * / // % **, and parentheses, "
        "e.g. '(2+3)*4' or '2**10'. Use python_repl for anything else."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "string",
        "description": "Python math expression, e.g. '2+2'",
    }

    def run(self, input: Any) -> str:
        """The value of the expression, or ``Error: ...``."""
        if isinstance(input, int | float) and not isinstance(input, bool):
            input = str(input)
        if not isinstance(input, str) or not all(c in ALLOWED_CHARS for c in input):
            return f"Error: Only math expressions allowed, got: {input}"
        try:
            return str(calculate(input))
        except RecursionError:
            return "Error: expression nested too deeply"
        except (ArithmeticError, ValueError, SyntaxError, MemoryError) as exc:
            return f"Error: {exc}"


TOOLS = (CalculatorTool,)
