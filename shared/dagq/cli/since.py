"""``--since``: a moment given as an age or a date, for listing commands."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

import click

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class Since(click.ParamType[float]):
    """A moment: an age (``90s``, ``30m``, ``2h``, ``1d``, ``1w``) or an ISO date/time
    (local time unless it names a zone); converted to epoch seconds."""

    name = "when"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        """Epoch seconds of ``value``; a usage error if it is neither form."""
        if isinstance(value, float):
            return value
        text = str(value).strip()
        m = _AGO.match(text)
        if m:
            return time.time() - float(m.group(1)) * _UNIT[m.group(2)]
        try:
            return datetime.fromisoformat(text).timestamp()
        except ValueError:
            self.fail(f"{text!r} is not an age like 30m, 2h, 1d or a date like "
                      "2026-12-01 or 2026-12-01T10:00", param, ctx)


SINCE = Since()
