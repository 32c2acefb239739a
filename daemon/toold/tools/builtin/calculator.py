"""calculator: Jianmu's arithmetic tool, evaluated from the syntax tree instead of eval().

Only numbers, ``+ - * / // % **``, unary signs and parentheses are evaluated, and
every operation whose result could be huge is sized before it runs, so ``9**9**9``
answers at once with an error instead of holding a thread for hours. The input's length
is capped before anything looks at it (Python's parser holds the interpreter lock for
the whole parse: 16 MB of ``1+1+...`` stalled every request for 20 s and took 3 GB), and
the evaluation runs on a worker thread against a deadline checked at every step (each
step is bounded by MAX_INT_BITS), so the daemon keeps answering other requests.
"""

from __future__ import annotations

import ast
import operator
import time
from collections.abc import Callable
from typing import Any, ClassVar

from toold.tools.annotations import READS
from toold.tools.base import Tool
from toold.tools.context import failed

ALLOWED_CHARS = frozenset("0123456789+-*/().% ")
MAX_INT_BITS = 100_000
"""Largest integer (in bits) any step may produce."""
MAX_DIGITS = int(MAX_INT_BITS * 0.30103)
MAX_INPUT_CHARS = 10_000
"""Longest expression accepted; checked before the input is parsed or even scanned."""
TIME_LIMIT = 5.0
"""Seconds an evaluation may take; checked between steps."""

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


def _evaluate(root: ast.AST, deadline: float) -> Number:
    """Post-order over an explicit stack: a long flat sum is as deep as it is long, which
    would exhaust Python's recursion limit long before the input cap."""
    pending: list[tuple[ast.AST, bool]] = [(root, False)]
    values: list[Number] = []
    while pending:
        if time.monotonic() > deadline:
            raise CalculationError(f"evaluation took longer than {TIME_LIMIT:g} s: simplify it")
        node, operands_done = pending.pop()
        if isinstance(node, ast.Expression):
            pending.append((node.body, False))
        elif isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            values.append(node.value)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            if not operands_done:
                pending += [(node, True), (node.right, False), (node.left, False)]
                continue
            right = values.pop()
            left = values.pop()
            _check_size(type(node.op), left, right)
            values.append(_BINARY[type(node.op)](left, right))
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            if not operands_done:
                pending += [(node, True), (node.operand, False)]
                continue
            values.append(_UNARY[type(node.op)](values.pop()))
        else:
            shown = ast.unparse(node) or type(node).__name__
            raise CalculationError(f"unsupported expression: {shown}")
    return values[0]


def calculate(expression: str, time_limit: float = TIME_LIMIT) -> Number:
    """Evaluate an arithmetic expression (already checked for length and characters)."""
    tree = ast.parse(expression.strip(), filename="<string>", mode="eval")
    return _evaluate(tree, time.monotonic() + time_limit)


class CalculatorTool(Tool):
    name = "calculator"
    annotations = READS
    description = (
        "Performs basic math calculations: numbers, + - * / // % **, and parentheses, "
        "e.g. '(2+3)*4' or '2**10'. Use python_repl for anything else."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "string",
        "description": "Python math expression, e.g. '2+2'",
    }

    def run(self, input: Any) -> str:
        """The value of the expression, or ``Error: ...`` (on a worker thread, never the
        event loop: sync tools run on one unless they say otherwise)."""
        if isinstance(input, int | float) and not isinstance(input, bool):
            input = str(input)
        if isinstance(input, str) and len(input) > MAX_INPUT_CHARS:
            return failed(
                f"Error: expression too long ({len(input):,} characters; the calculator takes "
                f"at most {MAX_INPUT_CHARS:,}): use python_repl for bigger computations"
            )
        if not isinstance(input, str) or not all(c in ALLOWED_CHARS for c in input):
            return failed(f"Error: Only math expressions allowed, got: {str(input)[:200]}")
        try:
            return str(calculate(input))
        except (RecursionError, MemoryError):
            # The parser's own limits (about 200 nested parentheses or signs).
            return failed("Error: expression nested too deeply")
        except (ArithmeticError, ValueError, SyntaxError) as exc:
            return failed(f"Error: {exc}")


TOOLS = (CalculatorTool,)
