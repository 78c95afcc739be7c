"""Reading HTTP requests: definition bodies (size, content type, format) and query values.

Every check raises ``ApiError`` with a 4xx status, so a handler never answers bad input
with a 500 and never reaches the store with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Literal

import azure.functions as func

from dagq.compose.loader import require_inline
from dagq.core.model import WorkflowDef
from dagq.core.parse import load_definition
from dagq.functions.errors import ApiError
from dagq.protocol.http import BAD_PARAMETER, EMPTY_BODY, TOO_LARGE, UNSUPPORTED_MEDIA_TYPE

Format = Literal["yaml", "json"] | None

MEDIA_TYPES: dict[str, Format] = {
    "application/json": "json",
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "text/x-yaml": "yaml",
}
"""Accepted request content types and the definition format each one means.

``text/plain`` (and a body without a type) is refused: a web page on any site may send
it cross-site without asking first (a CORS "simple request"), the types above it may not.
"""


def media_type(req: func.HttpRequest) -> str:
    """The request's media type, lower-cased, without parameters ("" when absent)."""
    raw = req.headers.get("content-type") or ""
    return raw.split(";", 1)[0].strip().lower()


def read_body(req: func.HttpRequest, max_bytes: int) -> bytes:
    """The request body; 413 when it (or its declared length) exceeds ``max_bytes``."""
    declared = req.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(int(declared), max_bytes)
    body = req.get_body() or b""
    if len(body) > max_bytes:
        raise _too_large(len(body), max_bytes)
    return body


def _too_large(size: int, max_bytes: int) -> ApiError:
    return ApiError(TOO_LARGE,
                    f"the request body has {size} bytes; the limit is {max_bytes} "
                    "(app setting DAGQ_MAX_REQUEST_BYTES)")


def read_definition(req: func.HttpRequest, max_bytes: int) -> WorkflowDef:
    """Parse and validate the definition in the request body (YAML or JSON)."""
    body = read_body(req, max_bytes)
    kind = media_type(req)
    if kind not in MEDIA_TYPES:
        given = f"content type {kind!r} is" if kind else "a body without a Content-Type is"
        raise ApiError(UNSUPPORTED_MEDIA_TYPE,
                       f"{given} not accepted for a workflow definition; send YAML "
                       "(Content-Type: application/yaml) or JSON (application/json)",
                       sorted(MEDIA_TYPES))
    if not body.strip():
        raise ApiError(EMPTY_BODY, "the request body is empty; send a workflow "
                       "definition as YAML or JSON")
    defn = load_definition(body, source="request body", fmt=MEDIA_TYPES[kind])
    return require_inline(defn, why="by the HTTP API")


def require_json(req: func.HttpRequest, body: bytes, what: str) -> None:
    """415 unless a non-empty ``body`` is declared ``application/json`` (an empty body
    may name no type: it carries nothing a cross-site page could slip in)."""
    kind = media_type(req)
    if kind == "application/json" or (not kind and not body.strip()):
        return
    given = f"content type {kind!r} is" if kind else "a body without a Content-Type is"
    raise ApiError(UNSUPPORTED_MEDIA_TYPE,
                   f"{given} not accepted {what}; send a JSON object (Content-Type: "
                   "application/json)", ["application/json"])


def object_param(req: func.HttpRequest, name: str) -> dict[str, Any] | None:
    """A query value holding a JSON object (e.g. ``params={"epochs": 5}``); 400 otherwise,
    and for an object that names one key twice (which value was meant?)."""
    value = text_param(req, name)
    if value is None:
        return None
    try:
        data = json.loads(value, object_pairs_hook=_unique_keys)
    except _RepeatedKey as exc:
        raise ApiError(BAD_PARAMETER,
                       f"query parameter {name} gives the key {exc.key!r} more than once; "
                       "give each key once", [{"parameter": name, "key": exc.key}]) from None
    except ValueError as exc:
        data = exc
    if not isinstance(data, dict):
        raise ApiError(BAD_PARAMETER,
                       f"query parameter {name} must be a JSON object such as "
                       f'{{"epochs": 5}}, got {value[:80]!r}', [{"parameter": name}])
    return data


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def text_param(req: func.HttpRequest, name: str) -> str | None:
    """A query value, or None when absent or empty."""
    value = req.params.get(name)
    return value if value else None


def choice_param(req: func.HttpRequest, name: str, choices: Sequence[str]) -> str | None:
    """A query value that must be one of ``choices``; 400 otherwise (an empty value too:
    it is none of them)."""
    raw = req.params.get(name)
    value = None if raw is None else str(raw)
    if value is not None and value not in choices:
        raise ApiError(BAD_PARAMETER,
                       f"query parameter {name}={value!r} is not one of: {', '.join(choices)}",
                       [{"parameter": name, "allowed": list(choices)}])
    return value


def int_param(req: func.HttpRequest, name: str, default: int | None, *,
              minimum: int, maximum: int | None = None) -> int | None:
    """A whole-number query value within bounds; 400 otherwise."""
    value = text_param(req, name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum or (maximum is not None and number > maximum):
        bounds = f"from {minimum}" + (f" to {maximum}" if maximum is not None else "")
        raise ApiError(BAD_PARAMETER,
                       f"query parameter {name}={value!r} must be a whole number {bounds}",
                       [{"parameter": name, "minimum": minimum, "maximum": maximum}])
    return number


def number_param(req: func.HttpRequest, name: str) -> float | None:
    """A finite number as a query value (``1764700000.5``), or None when absent; 400
    otherwise."""
    value = text_param(req, name)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise ApiError(BAD_PARAMETER, f"query parameter {name}={value!r} must be a number "
                       "(epoch seconds, e.g. 1764700000)", [{"parameter": name}])
    return number
