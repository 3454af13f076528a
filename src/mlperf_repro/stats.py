"""Repeat-run statistics: is a gap real or run-to-run noise? (`compare` judges gaps between
trees with it, the summary the spread of a scenario's repeated performance runs.)"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

# Two-sided 95% Student-t critical values by degrees of freedom (1..30); 1.96 beyond.
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stdev: float
    low: float  # 95% confidence interval of the mean
    high: float
    minimum: float
    maximum: float

    @property
    def relative_spread(self) -> float:
        return (self.maximum - self.minimum) / self.mean if self.mean else 0.0

    def text(self, digits: int = 2) -> str:
        if self.n == 1:
            return f"{self.mean:.{digits}f}"
        return (
            f"{self.mean:.{digits}f} ± {self.stdev:.{digits}f} (n={self.n}, 95% CI "
            f"{self.low:.{digits}f}-{self.high:.{digits}f})"
        )


def summarize(values: list[float]) -> Summary | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) == 1:
        return Summary(1, mean, 0.0, mean, mean, mean, mean)
    stdev = statistics.stdev(values)
    t = _T95[len(values) - 2] if len(values) - 1 <= len(_T95) else 1.96
    half = t * stdev / math.sqrt(len(values))
    return Summary(len(values), mean, stdev, mean - half, mean + half, min(values), max(values))


def overlaps(a: Summary, b: Summary) -> bool:
    """Whether the two means' 95% intervals overlap (a gap inside the noise)."""
    return a.low <= b.high and b.low <= a.high
