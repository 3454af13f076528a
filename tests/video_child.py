"""Run one LoadGen test through the diffusers video backend (the run stage's own entry point).

    python video_child.py ARGS.json [--cache-results]

``--cache-results`` makes the backend a CACHING system under test (test-only, named as such):
it answers a prompt it has rendered before with the stored video instead of rendering it
again, which is what TEST04 exists to catch. Prints ``RECORD <json>``.
"""

from __future__ import annotations

import json
import sys

from mlperf_repro.backends import diffusers_video
from mlperf_repro.stages.runs import loadgen_job


class CachingVideoBackend(diffusers_video.DiffusersVideoBackend):
    """Serves repeated prompts from a result cache: a system under test that cheats."""

    def _respond(self, batch):
        cache = self.__dict__.setdefault("cache", {})
        fresh = list({r.prompt: r for r in batch if r.prompt not in cache}.values())
        if fresh:
            cache.update({r.prompt: self._mp4_bytes(frames) for r, frames in zip(fresh, self._render(fresh))})
        for request in batch:
            self.on_complete(request.request_id, cache[request.prompt])


if __name__ == "__main__":
    if "--cache-results" in sys.argv:
        diffusers_video.DiffusersVideoBackend = CachingVideoBackend
    record = loadgen_job(**json.loads(open(sys.argv[1]).read()))
    print("RECORD " + json.dumps(record), flush=True)
