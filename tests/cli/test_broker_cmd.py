"""``samsa broker`` as a subprocess: the ready line, serving, clean exit on SIGTERM/SIGINT."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.protocol import ApiKey, ApiVersionsRequest, decode_response, encode_request


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "samsa.cli", "broker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ready_address(proc: subprocess.Popen[str]) -> tuple[str, int]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on "), (line, proc.stderr.read() if proc.stderr else "")
    host, _, port = line.removeprefix("listening on ").strip().rpartition(":")
    return host, int(port)


def api_versions_error_code(host: str, port: int) -> int:
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(encode_request(ApiVersionsRequest(), 0, 1, "cli-test"))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
    return int(decode_response(ApiKey.API_VERSIONS, 0, data[4:])[1].error_code)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_and_exits_cleanly_on_signal(tmp_path: Path, procs: list[subprocess.Popen[str]],
                                            sig: signal.Signals) -> None:
    proc = start("--port", "0", "--data-dir", str(tmp_path / "data"))
    procs.append(proc)
    host, port = ready_address(proc)
    assert host == "127.0.0.1" and port > 0
    assert api_versions_error_code(host, port) == 0
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == 0
    assert (tmp_path / "data" / "meta.properties").exists()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_config_file_and_overrides(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"# test\nlog.dirs={tmp_path / 'from-file'}\nnum.partitions=2\n"
                     "listeners=PLAINTEXT://127.0.0.1:0\n"
                     "advertised.listeners=PLAINTEXT://localhost:0\n")
    proc = start("--config-file", str(props), "-c", "num.io.threads=2",
                 "--config", "node.id=5")
    procs.append(proc)
    host, port = ready_address(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == f"advertised as localhost:{port}"
    assert api_versions_error_code(host, port) == 0
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert "node.id=5" in (tmp_path / "from-file" / "meta.properties").read_text()


@pytest.mark.parametrize("args, named", [
    (["-c", "num.partition=3"], "num.partition"),
    (["-c", "num.io.threads=zero"], "num.io.threads"),
    (["-c", "novalue"], "key=value"),
    (["--config-file", "/nonexistent/server.properties"], "--config-file"),
])
def test_bad_settings_fail_with_a_message(tmp_path: Path, args: list[str], named: str) -> None:
    result = subprocess.run([sys.executable, "-m", "samsa.cli", "broker", "--port", "0",
                             "--data-dir", str(tmp_path), *args],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_data_dir_is_explained(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "samsa.cli", "broker", "--port", "0"],
                            check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2
    assert "--data-dir" in result.stderr


def test_data_dir_in_use_is_explained(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    first = start("--port", "0", "--data-dir", str(tmp_path))
    procs.append(first)
    ready_address(first)
    result = subprocess.run([sys.executable, "-m", "samsa.cli", "broker", "--port", "0",
                             "--data-dir", str(tmp_path)],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "in use" in result.stderr and "Traceback" not in result.stderr


def test_one_ready_line_per_listener_and_listeners_win_over_port(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="a-secret";'
    props = tmp_path / "server.properties"
    props.write_text("listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0\n"
                     "sasl.enabled.mechanisms=PLAIN\n"
                     f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n")
    proc = start("--config-file", str(props), "--port", "9", "--data-dir", str(tmp_path / "d"))
    procs.append(proc)
    sasl_host, sasl_port = ready_address(proc)
    plain_host, plain_port = ready_address(proc)
    assert 9 not in (sasl_port, plain_port) and sasl_port != plain_port
    # ApiVersions is served on both (on the SASL one, before authentication, as Kafka).
    assert api_versions_error_code(sasl_host, sasl_port) == 0
    assert api_versions_error_code(plain_host, plain_port) == 0
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    assert "--host/--port are ignored" in proc.stderr.read()
