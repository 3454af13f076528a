"""How many queries LoadGen generates for a performance run, by its own rules (LoadGen 6.0:
``TestSettingsInternal`` and ``GenerateQueries``), for the plan view and the progress lines.

With ``sample_concatenate_permutation`` (the round's mlperf.conf sets it for the LLMs) LoadGen
pads the run to whole permutations of the loaded performance samples: Offline's one query to a
multiple of them, Server's queries to the first multiple that covers min_duration at target_qps
(and it issues every generated Server query), SingleStream's min_query_count to the multiple
above 2 x min_duration x target_qps. A llama2-70b Interactive run at 42.5 queries/s for 600 s
is 49,152 queries (2 x 24,576), not 25,500. Foundation layer: no imports from the package.
"""

from __future__ import annotations

import math

# Offline issues 1.1 x min_duration x target_qps samples (LoadGen's slack over min_duration).
OFFLINE_SLACK = 1.1
# SingleStream with sample_concatenate_permutation asks 2 x min_duration x target_qps queries.
SINGLE_STREAM_CONCATENATE_SLACK = 2.0


def generated_queries(
    loadgen_scenario: str,
    *,
    min_duration_s: float,
    target_qps: float,
    min_query_count: float,
    loaded_samples: int = 0,
    concatenate: bool = False,
) -> float:
    """Queries of one performance run (Offline: the samples of its one query) at ``target_qps``
    (SingleStream: 1 / target_latency). ``loaded_samples``: the performance sample count in
    effect (LoadGen's performance_sample_count_override, else the QSL's); ``concatenate``: the
    run's sample_concatenate_permutation. Server and Interactive expect min_duration x
    target_qps arrivals (the Poisson schedule's mean)."""
    pad = int(loaded_samples) if concatenate and loaded_samples > 0 else 0
    if loadgen_scenario == "Offline":
        samples = max(float(min_query_count), float(int(OFFLINE_SLACK * min_duration_s * target_qps)))
        return _up_to_multiple(samples, pad)
    if loadgen_scenario == "SingleStream" and pad:
        # TestSettingsInternal: always adds up to the next multiple, one whole set more if it is one already.
        queries = max(int(min_query_count), int(SINGLE_STREAM_CONCATENATE_SLACK * min_duration_s * target_qps))
        return float(queries + pad - queries % pad)
    return _up_to_multiple(max(float(min_query_count), min_duration_s * target_qps), pad)


def _up_to_multiple(count: float, pad: int) -> float:
    return float(math.ceil(count / pad) * pad) if pad else count
