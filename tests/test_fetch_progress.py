"""A download reports bytes, rate and ETA every interval, and names the host when it stalls
(a loopback server that sends slowly, then stops for a while)."""

from __future__ import annotations

import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mlperf_repro import progress
from mlperf_repro.fetch._download import _download
from mlperf_repro.progress import PROGRESS_PREFIX, STALL_PREFIX, ProgressSettings

CHUNK = 256 * 1024
CHUNKS = 8


class SlowFile(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", str(CHUNK * CHUNKS))
        self.end_headers()
        for i in range(CHUNKS):
            self.wfile.write(bytes([i]) * CHUNK)
            self.wfile.flush()
            time.sleep(1.2 if i == 3 else 0.1)  # a pause halfway: the stall

    def log_message(self, *args) -> None:
        pass


@pytest.mark.slow
def test_a_download_logs_bytes_rate_eta_and_a_stall_naming_the_host(tmp_path, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowFile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/weights.bin"
    progress.configure(ProgressSettings(interval_s=0.2, stall_after_s=0.6))
    try:
        _download(urllib.request.build_opener(), url, tmp_path / "weights.bin", auth=None, timeout=30)
    finally:
        progress.configure()
        server.shutdown()
    assert (tmp_path / "weights.bin").stat().st_size == CHUNK * CHUNKS
    lines = capsys.readouterr().err.splitlines()
    label = f"download {url}"
    assert lines[0] == f"{PROGRESS_PREFIX}{label}: started (2.0 MiB expected)"
    periodic = [line for line in lines if line.startswith(f"{PROGRESS_PREFIX}{label}: ") and "ETA " in line]
    assert len(periodic) >= 2, lines
    assert all("MiB/2.0 MiB (" in line and "B/s, ETA " in line for line in periodic), periodic
    stalls = [line for line in lines if line.startswith(STALL_PREFIX)]
    assert stalls and f"waiting for 127.0.0.1 to send more of {url}" in stalls[0], lines
    assert any("resumed after" in line for line in lines)
    assert lines[-1].startswith(f"{PROGRESS_PREFIX}{label}: finished: 2.0 MiB/2.0 MiB (100%)")
