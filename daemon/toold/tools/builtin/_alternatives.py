"""Jianmu's parameter names accepted in the base tools' argument models.

One tool serves both documents: the schema shows the base tool's name (``file_path``,
``command``), and a call may use Jianmu's (``path``; ``input`` or ``cmd``) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ModelWrapValidatorHandler, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

M = TypeVar("M", bound=BaseModel)


def _blank(value: Any) -> bool:
    return value is None or value == ""


def fold_alternatives(data: Any, field: str, alternatives: tuple[str, ...]) -> Any:
    """Move the first non-blank alternative into ``field`` when ``field`` is absent or blank.

    Two different non-blank values for the same argument are refused: guessing which
    one the caller meant could write to the wrong file.
    """
    if not isinstance(data, Mapping) or not any(name in data for name in alternatives):
        return data
    out = dict(data)
    given = [(name, out.pop(name)) for name in alternatives if name in out]
    source, chosen = field, out.get(field)
    for name, value in given:
        if _blank(value):
            continue
        if _blank(chosen):
            source, chosen = name, value
            out[field] = value
        elif value != chosen:
            raise PydanticCustomError(
                "conflicting_alternatives",
                "{first} and {second} name the same argument with different values; "
                "pass only {field}",
                {"first": source, "second": name, "field": field},
            )
    if field not in out:
        out[field] = given[0][1]
    return out


def validate_with_alternatives(
    data: Any,
    handler: ModelWrapValidatorHandler[M],
    field: str,
    alternatives: tuple[str, ...],
) -> M:
    """Run ``handler`` on ``data`` with alternatives folded into ``field``.

    When neither name is given, pydantic's ``Field required`` for ``field`` is kept
    (clients match on it) and the fix is appended to it.
    """
    try:
        return handler(fold_alternatives(data, field, alternatives))
    except ValidationError as exc:
        errors = exc.errors()
        if not any(e["type"] == "missing" and e["loc"] == (field,) for e in errors):
            raise
        others = " or ".join(alternatives)
        hint = f"Field required; pass {field} (or {others})"
        details: list[InitErrorDetails] = []
        for e in errors:
            if e["type"] == "missing" and e["loc"] == (field,):
                details.append(
                    {
                        "type": PydanticCustomError("missing", hint),
                        "loc": e["loc"],
                        "input": e["input"],
                    }
                )
            else:
                detail: InitErrorDetails = {"type": e["type"], "loc": e["loc"], "input": e["input"]}
                if "ctx" in e:
                    detail["ctx"] = e["ctx"]
                details.append(detail)
        raise ValidationError.from_exception_data(exc.title, details) from None
