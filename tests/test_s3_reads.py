"""The library's own GETs of a URL root's images: the signature against botocore's signer and
against a server that checks signatures, and the HTTP reading against a stranger's answers."""
import datetime
import socket
import threading
import time

import numpy as np
import pytest
from s3_server import SECRET_KEY, Environment, WeedServer, aws_environment, identities_file, needs_boto3

from dali_loaders.sources import http_get, storage, url_reads
from dali_loaders.sources.signing import GetSigner

# object keys that S3's canonical URI encodes in every way: spaces, reserved and unicode characters
KEYS = ["plain.jpg", "with space.jpg", "plus+equals=and&.jpg", "ünïcødé/ñ.jpg", "tilde~percent%25.jpg",
        "a/b/c(1)*!'@$,;:.jpg"]
WHEN = datetime.datetime(2026, 11, 26, 10, 30, 5, tzinfo=datetime.timezone.utc)


def needs_botocore(module: str):
    """botocore.<module>; the test skips where botocore (the s3 extra's) is not installed, so
    that the file's other tests still run there."""
    return pytest.importorskip(f"botocore.{module}", reason="botocore comes with the s3 extra: "
                                                            "pip install dali_loaders[s3]")


@pytest.mark.parametrize("token", [None, "a-session/token+="])
@pytest.mark.parametrize("key", KEYS)
def test_the_signature_is_botocores(key, token, monkeypatch):
    """The same Authorization header as botocore's S3 signer for the same request and time."""
    auth, AWSRequest = needs_botocore("auth"), needs_botocore("awsrequest").AWSRequest
    Credentials = needs_botocore("credentials").Credentials
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    path, headers = GetSigner("http://127.0.0.1:9000/bucket", "eu-west-3", credentials).sign(key, now=WHEN)
    monkeypatch.setattr(auth, "get_current_datetime", lambda remove_tzinfo=True: WHEN.replace(tzinfo=None))
    reference = AWSRequest("GET", "http://127.0.0.1:9000" + path)
    auth.S3SigV4Auth(credentials, "s3", "eu-west-3").add_auth(reference)
    assert headers["authorization"] == reference.headers["Authorization"]
    assert headers["x-amz-date"] == reference.headers["X-Amz-Date"]
    assert headers.get("x-amz-security-token") == reference.headers.get("X-Amz-Security-Token")


def test_a_new_day_or_secret_gets_a_new_signing_key():
    credentials = needs_botocore("credentials").Credentials("AKID", "first-secret")
    signer = GetSigner("https://store.example/bucket/", "us-east-1", credentials)
    today = signer.sign("k", now=WHEN)[1]["authorization"]
    tomorrow = signer.sign("k", now=WHEN + datetime.timedelta(days=1))[1]["authorization"]
    credentials.secret_key = "second-secret"   # temporary credentials, refreshed
    refreshed = signer.sign("k", now=WHEN)[1]["authorization"]
    assert len({today, tomorrow, refreshed}) == 3
    assert "20261127/us-east-1/s3/aws4_request" in tomorrow
    assert "secret" not in repr(signer)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A server that checks every signature (only the test keys get in), holding KEYS."""
    needs_boto3()
    where = str(tmp_path_factory.mktemp("signed"))
    server = WeedServer(where, ["-s3.config=" + identities_file(where)])
    server.start()
    try:
        s3 = server.client()
        server.bucket("signed")
        for i, key in enumerate(KEYS):
            s3.put_object(Bucket="signed", Key=key, Body=bytes([i]) * (1000 + i))
        yield server
    finally:
        server.stop()


def test_a_server_that_checks_signatures_serves_every_key(guarded):
    with Environment(aws_environment(guarded.endpoint)):
        for i, key in enumerate(KEYS):
            body = url_reads.get_object(f"s3://signed/{key}")
            assert isinstance(body, np.ndarray) and body.dtype == np.uint8
            assert body.tobytes() == bytes([i]) * (1000 + i), key


def test_a_wrong_secret_is_denied_by_name_and_never_said(guarded):
    wrong = SECRET_KEY + "-wrong"
    with Environment({**aws_environment(guarded.endpoint), "AWS_SECRET_ACCESS_KEY": wrong}):
        with pytest.raises(storage.StorageError, match=r"access to s3://signed/plain.jpg was denied") as e:
            url_reads.get_object("s3://signed/plain.jpg")
    assert wrong not in str(e.value) + repr(e.value) and SECRET_KEY not in str(e.value)


def test_a_missing_key_is_named(guarded):
    with Environment(aws_environment(guarded.endpoint)):
        with pytest.raises(FileNotFoundError, match=r"s3://signed/nothing.jpg does not exist"):
            url_reads.get_object("s3://signed/nothing.jpg")


# -- a stranger's answers ------------------------------------------------------------------


class Scripted:
    """A server on loopback that answers each connection with `reply(connection)`; counts
    the connections it accepted."""

    def __init__(self, reply, tls=None):
        self.reply, self.connections, self.tls = reply, 0, tls
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            self.reply(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def connect(self, timeout=2.0):
        return http_get.Connection("http", "127.0.0.1", self.port, timeout, timeout)

    def close(self):
        self.listener.close()


def requests_on(conn):
    """Each request a client sends on `conn`, as text, until it closes the connection."""
    while True:
        request = read_request(conn).decode()
        if not request:
            return
        yield request


def read_request(conn) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(4096)
        if not piece:
            return b""
        data += piece
    return data


def test_a_body_sent_in_pieces_arrives_whole_and_the_connection_is_kept():
    body = bytes(range(256)) * 1000

    def reply(conn):
        while read_request(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Other: a:b\r\n\r\n" % len(body) + body[:10])
            for start in range(10, len(body), 70_000):
                time.sleep(0.01)
                conn.sendall(body[start:start + 70_000])

    server = Scripted(reply)
    connection = server.connect()
    for _ in range(3):
        answer = connection.get("/k", {"host": "x"}, 1 << 20)
        assert answer.status == 200 and answer.body.tobytes() == body
        assert answer.headers["x-other"] == "a:b"
    assert server.connections == 1
    server.close()


def test_a_chunked_body_is_joined_and_one_over_the_limit_is_refused():
    def reply(conn):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n")

    server = Scripted(reply)
    assert server.connect().get("/k", {}, 100).body.tobytes() == b"hello world"
    over = server.connect().get("/k", {}, 8)
    assert over.body is None and over.size > 8
    server.close()


def test_a_length_over_the_limit_is_not_read():
    def reply(conn):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n" + b"x" * 1000)

    server = Scripted(reply)
    connection = server.connect()
    answer = connection.get("/k", {}, 1 << 20)
    assert answer.body is None and answer.size == 10 ** 12
    assert connection.sock is None   # closed: its unread body cannot precede another answer
    server.close()


@pytest.mark.parametrize("sent, error", [
    (b"HTTP/1.1 200 OK\r\nX: " + b"y" * (1 << 20), http_get.ProtocolError),        # endless headers
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", http_get.ProtocolError),                      # not HTTP
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", ConnectionResetError),  # closed mid-body
    (b"HTTP/1.1 200 OK\r\n\r\nno length", http_get.ProtocolError),                 # neither length nor chunks
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", http_get.ProtocolError),
    (b"", ConnectionResetError),                                                    # closed at once
    (b"HTTP/1.1 100 Continue\r\n\r\n" * 100, http_get.ProtocolError),              # interim answers only
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: x\r\n" * 20000,
     http_get.ProtocolError),                                                      # endless trailers
])
def test_a_bad_answer_is_a_short_error(sent, error):
    def reply(conn):
        read_request(conn)
        conn.sendall(sent)

    server = Scripted(reply)
    with pytest.raises(error) as e:
        server.connect().get("/k", {}, 1 << 20)
    assert len(str(e.value)) < 200 and f"127.0.0.1:{server.port}" in str(e.value)
    server.close()


def test_a_server_that_never_answers_times_out():
    def reply(conn):
        read_request(conn)
        time.sleep(5)

    server = Scripted(reply)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        server.connect(timeout=0.5).get("/k", {}, 100)
    assert time.monotonic() - started < 3
    server.close()


CHILD = """
import json, os, sys
from dali_loaders.bench import storage
cpus = os.sched_getaffinity(0)
result = storage.run("tiny", threads=1, rounds=1)
result["cpus_kept"] = all(os.sched_getaffinity(int(t)) == cpus for t in os.listdir("/proc/self/task"))
result["cpus"], result["table"] = sorted(cpus), storage.table(result)
print(json.dumps(result))
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_storage_bench_counts_one_get_an_image_and_leaves_the_cpus_as_they_were():
    """bench --storage s3 --tiny (its own process: DALI keeps the S3 endpoint it first reads):
    five rows of the same images; the server's own counts say one GET an image through the
    library and more through DALI's reader (a size, then the bytes)."""
    needs_boto3()   # the library's credentials and signed reads are boto3's
    import json
    import subprocess
    import sys

    from subprocess_env import subprocess_env

    done = subprocess.run([sys.executable, "-c", CHILD], env=subprocess_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["cpus_kept"]
    local, pool, distant, dali, dali_distant = result["rows"]
    n = 48   # storage.SIZES["tiny"]
    assert [row["images"] for row in result["rows"]] == [n] * 5
    for row in (pool, distant):
        assert (row["get_per_epoch"], row["head_per_epoch"]) == (n, 0)
    for row in (dali, dali_distant):
        assert row["get_per_epoch"] + row["head_per_epoch"] >= n
    assert pool["mib_per_epoch"] > 0 and local["vs_local"] == 1.0
    if len(result["cpus"]) > 1:
        assert result["server_cpus"] == [max(result["cpus"])] and max(result["cpus"]) not in result["loader_cpus"]
    assert "| s3 | 48 |" in result["table"]


def test_a_bucket_in_another_region_is_signed_again_for_it_once():
    """AWS refuses a signature for the wrong region, naming the bucket's (x-amz-bucket-region):
    the GET is signed again for it, and the bucket's later GETs start with it."""
    needs_boto3()   # the library's credentials and signed reads are boto3's
    regions = []

    def reply(conn):
        for request in requests_on(conn):
            region = request.split("Credential=")[1].split("/")[2]
            regions.append(region)
            if region != "eu-west-3":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nx-amz-bucket-region: eu-west-3\r\n"
                             b"Content-Length: 0\r\n\r\n")
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    server = Scripted(reply)
    with Environment({**aws_environment(f"http://127.0.0.1:{server.port}"), "AWS_REGION": "us-east-1"}):
        assert url_reads.get_object("s3://elsewhere/a.jpg").tobytes() == b"ok"
        assert url_reads.get_object("s3://elsewhere/b.jpg").tobytes() == b"ok"
    assert regions == ["us-east-1", "eu-west-3", "eu-west-3"]
    server.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl's command line) and its key."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    where = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_an_https_store_is_read_with_its_ca_bundle_and_refused_without(certificate):
    needs_boto3()   # the library's credentials and signed reads are boto3's
    import ssl

    cert, key = certificate
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)

    def reply(conn):
        while read_request(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nencrypted")

    trusted, unknown = Scripted(reply, tls=served), Scripted(reply, tls=served)
    with Environment({**aws_environment(f"https://127.0.0.1:{trusted.port}"), "AWS_CA_BUNDLE": cert}):
        assert url_reads.get_object("s3://tls/a.jpg").tobytes() == b"encrypted"
    with Environment(aws_environment(f"https://127.0.0.1:{unknown.port}")):   # the system's CAs: not this one
        with pytest.raises(storage.StorageError, match=r"cannot reach the object store at https://127.0.0.1:\d+ "
                                                       r"for s3://tls/a.jpg \(SSLCertVerificationError\)"):
            url_reads.get_object("s3://tls/a.jpg")
    trusted.close()
    unknown.close()


def test_no_credentials_anywhere_is_said_with_what_to_set(monkeypatch, tmp_path):
    needs_boto3()   # the library's credentials and signed reads are boto3's
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with Environment({**{k: v for k, v in aws_environment("http://127.0.0.1:9").items() if "KEY" not in k},
                      "HOME": str(tmp_path)}):   # no ~/.aws either
        with pytest.raises(storage.StorageError, match=r"no credentials for s3://any/a.jpg: set AWS_ACCESS_KEY_ID"):
            url_reads.get_object("s3://any/a.jpg")


def test_a_range_is_asked_for_and_read_whatever_the_server_does_with_it():
    """A header read: `Range: bytes=0-9` sent (unsigned, beside the signed headers); a 206
    answer read, a server that ignores Range cut to the range, a range past the end empty."""
    needs_boto3()   # the library's credentials and signed reads are boto3's
    body = bytes(range(100))
    asked = []

    def reply(conn):
        for request in requests_on(conn):
            wanted = [line.split(":", 1)[1].strip() for line in request.split("\r\n") if line.lower().startswith("range:")]
            asked.append(wanted[0] if wanted else None)
            if "ignores" in request.split(" ")[1]:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + body)
            elif "short" in request.split(" ")[1]:
                conn.sendall(b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\n\r\n")
                return
            else:
                first, last = (int(x) for x in wanted[0][len("bytes="):].split("-"))
                part = body[first:last + 1]
                conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\n\r\n" % len(part) + part)

    server = Scripted(reply)
    with Environment(aws_environment(f"http://127.0.0.1:{server.port}")):
        assert url_reads.get_object("s3://b/honours.jpg", 0, 10).tobytes() == body[:10]
        assert url_reads.get_object("s3://b/honours.jpg", 90, 30).tobytes() == body[90:]
        assert url_reads.get_object("s3://b/ignores.jpg", 5, 10).tobytes() == body[5:15]
        assert url_reads.get_object("s3://b/short.jpg", 0, 10).tobytes() == b""
        assert url_reads.get_object("s3://b/honours.jpg", 0, 0).tobytes() == b""   # nothing asked: no request
    assert asked == ["bytes=0-9", "bytes=90-119", "bytes=5-14", "bytes=0-9"]
    server.close()
