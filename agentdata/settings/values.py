"""Value types with rules of their own, defined once and used by every setting that holds one.

`Band` is a pass-rate band, `LO,HI` with both ends exclusive (`LO < rate < HI`, ZeroTIR's and
DAPO's online filter): `filter`'s pool band, `train`'s closed-loop band and GRPO's online band.
`CountBand` is a band of counts with both ends inclusive (`MIN <= calls <= MAX`): curate's
tool-call band. Either is written `LO,HI` on the command line and in a file (a two-item list
works too), records itself as `[LO, HI]`, and works on a number or a polars column alike:

    band = Band.parse("0.05,0.8")
    band.contains(0.5)                      # True
    frame.filter(band.contains(pl.col("pass_rate")))
    band.straddles(0.15, 0.85)              # an interval holding an edge strictly inside: True
"""

from __future__ import annotations

import math
from typing import Any

from agentdata.settings.fields import SettingValue


class Band(tuple, SettingValue):
    """LO,HI with both ends exclusive. A tuple (`low, high = band`, `band == (0.05, 0.8)`, JSON `[0.05, 0.8]`)
    that is checked when made."""

    inclusive = False  # a pass-rate band: both ends exclusive
    example = "0.05,0.8"

    def __new__(cls, low: Any, high: Any = None) -> Band:
        if high is None:  # Band(iterable), as tuple(iterable) is built (dataclasses.asdict does)
            low, high = cls._pair(low)
        low, high = cls._end(low), cls._end(high)
        if not (low <= high if cls.inclusive else low < high):
            raise ValueError(f"needs LO {'<=' if cls.inclusive else '<'} HI (e.g. {cls.example})")
        return super().__new__(cls, (low, high))

    @classmethod
    def parse(cls, value: Any) -> Band:
        """`"0.05,0.8"`, `[0.05, 0.8]`, `(0.05, 0.8)` or another band as this kind of band."""
        return cls(*cls._pair(value))

    @classmethod
    def _pair(cls, value: Any) -> tuple[Any, Any]:
        parts = value.split(",") if isinstance(value, str) else list(value) if not isinstance(value, dict) else value
        if not isinstance(parts, (list, tuple)) or len(parts) != 2:
            raise ValueError(f"expected two numbers as LO,HI (e.g. {cls.example})")
        return parts[0], parts[1]

    @classmethod
    def _end(cls, part: Any) -> float:
        try:
            if isinstance(part, bool):
                raise TypeError(part)
            number = float(part.strip()) if isinstance(part, str) else float(part)
        except (TypeError, ValueError, OverflowError):  # OverflowError: a whole number no float holds (10**400)
            raise ValueError(f"expected two numbers as LO,HI (e.g. {cls.example})") from None
        if math.isnan(number) or math.isinf(number):
            raise ValueError(f"expected two finite numbers as LO,HI (e.g. {cls.example})")
        return number

    @property
    def low(self) -> float:
        return self[0]

    @property
    def high(self) -> float:
        return self[1]

    def contains(self, value: Any) -> Any:
        """Whether `value` is in the band; a polars expression gives an expression. None is outside."""
        if value is None:
            return False
        if self.inclusive:
            return (value >= self.low) & (value <= self.high)
        return (value > self.low) & (value < self.high)

    def straddles(self, low: Any, high: Any) -> Any:
        """Whether the interval (low, high) holds an edge of the band strictly inside: more samples may still
        move a rate with that interval in or out of the band. Numbers or polars expressions."""
        return ((low < self.low) & (self.low < high)) | ((low < self.high) & (self.high < high))

    def as_setting(self) -> list[float]:
        return [self.low, self.high]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.low!r}, {self.high!r})"

    def __str__(self) -> str:
        return f"{self.low:g},{self.high:g}"

    def __reduce__(self):  # pickles (worker processes) as itself, not as a plain tuple
        return (type(self), (self.low, self.high))


class CountBand(Band):
    """A band of counts, MIN,MAX, both ends inclusive (curate's tool-call band)."""

    inclusive = True
    example = "1,8"

    @classmethod
    def _end(cls, part: Any) -> float:
        number = super()._end(part)
        if not float(number).is_integer():
            raise ValueError(f"expected two whole numbers as MIN,MAX (e.g. {cls.example})")
        return int(number)
