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


def fold_alternatives(data: Any, field: str, alternatives: tuple[str, ...]) -> Any:
    """Move the alternative into ``field`` when it is the only name given.

    Two names for the same argument are refused, whatever their values (even one
    empty): guessing which one the caller meant could read or write the wrong file,
    and the permission guard must judge the value the tool will use.
    """
    if not isinstance(data, Mapping) or not any(name in data for name in alternatives):
        return data
    names = [name for name in (field, *alternatives) if name in data]
    if len(names) > 1:
        raise PydanticCustomError(
            "conflicting_alternatives",
            "{first} and {second} name the same argument; pass only {field}",
            {"first": names[0], "second": names[1], "field": field},
        )
    out = dict(data)
    out[field] = out.pop(names[0])
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
