"""The library's reads through obstore (s3_client.py) against servers that check signatures,
serve TLS, or never answer: every key read, the AWS tools' settings honoured (endpoint,
region, keys, AWS_PROFILE with the shared files, AWS_CA_BUNDLE, path-style addressing), the
library's time limits, and each failure said in one line that names the URL and no secret."""
import socket
import sys
import threading

import numpy as np
import pytest
from s3_server import ACCESS_KEY, SECRET_KEY, Environment, WeedServer, aws_environment, identities_file, needs_s3_extra

from dali_loaders.sources import s3_client, storage, url_reads

# object keys that S3's canonical URI encodes in every way: spaces, reserved and unicode characters
KEYS = ["plain.jpg", "with space.jpg", "plus+equals=and&.jpg", "ünïcødé/ñ.jpg", "tilde~percent%25.jpg",
        "a/b/c(1)*!'@$,;:.jpg"]


def one_line(e) -> str:
    """The exception's text, checked to be one short line naming no secret."""
    text = str(e)
    assert "\n" not in text and len(text) < 400, text
    assert SECRET_KEY not in text + repr(e)
    return text


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A server that checks every signature (only the test keys get in), holding KEYS."""
    needs_s3_extra()
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
        listed = storage.list_tree("s3://signed")
        assert sorted(listed) == sorted(f"s3://signed/{key}" for key in KEYS)


def test_ranges_are_read_and_a_range_past_the_end_is_empty(guarded):
    body = bytes([0]) * 1000
    with Environment(aws_environment(guarded.endpoint)):
        assert url_reads.get_object("s3://signed/plain.jpg", 0, 10).tobytes() == body[:10]
        assert url_reads.get_object("s3://signed/plain.jpg", 990, 30).tobytes() == body[990:]
        assert storage.read_bytes("s3://signed/plain.jpg", 400) == body[400:]
        assert url_reads.get_object("s3://signed/plain.jpg", 0, 0).tobytes() == b""
        assert url_reads.get_object("s3://signed/plain.jpg", 2000, 10).tobytes() == b""   # past the end


def test_a_wrong_secret_is_denied_by_name_and_never_said(guarded):
    wrong = SECRET_KEY + "-wrong"
    with Environment({**aws_environment(guarded.endpoint), "AWS_SECRET_ACCESS_KEY": wrong}):
        for read in (lambda: url_reads.get_object("s3://signed/plain.jpg"), lambda: storage.list_tree("s3://signed")):
            with pytest.raises(storage.StorageError, match=r"access to s3://signed/?\S* was denied") as e:
                read()
            assert wrong not in one_line(e.value) + repr(e.value)


def test_a_missing_key_or_bucket_is_named_in_one_line(guarded):
    with Environment(aws_environment(guarded.endpoint)):
        with pytest.raises(FileNotFoundError, match=r"^s3://signed/nothing.jpg does not exist$") as key:
            url_reads.get_object("s3://signed/nothing.jpg")
        with pytest.raises(FileNotFoundError, match=r"bucket 'no-such' of s3://no-such/a.jpg does not exist") as bucket:
            url_reads.get_object("s3://no-such/a.jpg")
        with pytest.raises(FileNotFoundError, match=r"bucket 'no-such' of s3://no-such/val does not exist") as listed:
            storage.list_tree("s3://no-such/val")
    for e in (key, bucket, listed):
        assert "<Error>" not in one_line(e.value)


def test_credentials_are_never_in_a_repr_or_an_error(guarded):
    with Environment(aws_environment(guarded.endpoint)):
        import botocore.session

        store = s3_client.store("s3://signed/plain.jpg")
        credentials = s3_client.Credentials(botocore.session.Session().get_credentials())
        assert credentials()["secret_access_key"] == SECRET_KEY   # what obstore is handed...
        shown = repr(store) + repr(s3_client.settings()) + repr(credentials) + str(credentials)
        assert SECRET_KEY not in shown and SECRET_KEY[:8] not in shown   # ...and never shows


def shared_files(tmp_path, endpoint: str, secret: str) -> dict:
    """An AWS config and credentials file holding profile `tests` (its endpoint and region in
    the config, its keys in the credentials), and the environment that names them (no keys)."""
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    config.write_text(f"[profile tests]\nregion = eu-west-3\nendpoint_url = {endpoint}\n")
    credentials.write_text(f"[tests]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {secret}\n")
    return {"AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_PROFILE": "tests"}


def test_a_profile_in_the_shared_files_gives_endpoint_region_and_keys(guarded, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    with Environment({"AWS_EC2_METADATA_DISABLED": "true", **shared_files(tmp_path, guarded.endpoint, SECRET_KEY)}):
        assert url_reads.get_object("s3://signed/plain.jpg").tobytes() == bytes([0]) * 1000
        assert s3_client.settings() == s3_client.Settings(guarded.endpoint, "eu-west-3", False, None)
    wrong = SECRET_KEY + "-in-the-file"
    with Environment({"AWS_EC2_METADATA_DISABLED": "true", **shared_files(tmp_path, guarded.endpoint, wrong)}):
        with pytest.raises(storage.StorageError, match="access to s3://signed/plain.jpg was denied") as e:
            url_reads.get_object("s3://signed/plain.jpg")
        assert wrong not in one_line(e.value)
    with Environment({"AWS_PROFILE": "nobody", "AWS_CONFIG_FILE": str(tmp_path / "config")}):
        with pytest.raises(storage.StorageError, match=r"s3://signed/plain.jpg .*AWS_PROFILE") as e:
            url_reads.get_object("s3://signed/plain.jpg")
        one_line(e.value)


@pytest.mark.parametrize("names, region", [({"AWS_REGION": "eu-north-1", "AWS_DEFAULT_REGION": "us-west-2"}, "eu-north-1"),
                                           ({"AWS_DEFAULT_REGION": "us-west-2"}, "us-west-2"), ({}, "us-east-1")])
def test_the_region_is_the_aws_tools_one(names, region, monkeypatch):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    with Environment({**{k: v for k, v in aws_environment("http://127.0.0.1:9").items() if "REGION" not in k},
                      **names}):
        assert s3_client.settings().region == region


def test_without_boto3_the_environments_keys_are_enough(guarded, monkeypatch):
    monkeypatch.setitem(sys.modules, "botocore", None)   # import botocore raises ImportError
    monkeypatch.setitem(sys.modules, "botocore.session", None)
    with Environment(aws_environment(guarded.endpoint)):
        assert url_reads.get_object("s3://signed/plain.jpg").tobytes() == bytes([0]) * 1000
    with Environment({"AWS_ACCESS_KEY_ID": ""}):
        with pytest.raises(storage.StorageError, match=r"no credentials for s3://signed/a.jpg.*dali_loaders\[s3\]"):
            url_reads.get_object("s3://signed/a.jpg")


def test_without_the_client_an_s3_root_says_what_to_install(monkeypatch):
    from dali_loaders import get_imagefolder_iter_dali

    monkeypatch.setitem(sys.modules, "obstore", None)
    storage.forget_clients()
    with Environment(aws_environment("http://127.0.0.1:9")):
        with pytest.raises(ImportError, match=r"s3://any/val needs the obstore client: pip install "
                                              r"'dali_loaders\[s3\]'") as e:
            get_imagefolder_iter_dali("s3://any/val", 4, False)
    assert "botocore" not in one_line(e.value)


# -- servers of our own: TLS, addressing, a hung one ---------------------------------------


class Scripted:
    """A server on loopback that answers each request of each connection with `reply(request)`
    (None: no answer, ever); keeps the request lines it got."""

    def __init__(self, reply, tls=None):
        self.reply, self.tls, self.requests = reply, tls, []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            conn.settimeout(30)
            while True:
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(4096)
                    if not piece:
                        return
                    data += piece
                self.requests.append(data.split(b"\r\n", 1)[0].decode())
                answer = self.reply(data)
                if answer is None:
                    threading.Event().wait(30)
                    return
                conn.sendall(answer)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.listener.close()


def object_answer(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nLast-Modified: Thu, 26 Nov 2026 10:00:00 GMT\r\n"
            b"ETag: \"e\"\r\n\r\n" % len(body)) + body


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A private CA (openssl's command line) and a certificate it signed for 127.0.0.1:
    (the CA's PEM, the server's certificate, its key)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    where = tmp_path_factory.mktemp("tls")
    ca, ca_key, cert, key, request = (str(where / n) for n in ("ca.pem", "ca-key.pem", "cert.pem", "key.pem", "req"))
    (where / "ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
            "-subj", "/CN=dali-loaders test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
            "-days", "2", "-extfile", str(where / "ext"))
    return ca, cert, key


def test_an_https_store_is_read_with_its_ca_bundle_path_style_and_refused_without(certificate, monkeypatch):
    import ssl

    monkeypatch.setattr(s3_client, "RETRY_WINDOW_S", 1)   # obstore retries a failed TLS handshake too
    ca, cert, key = certificate
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    trusted, unknown = (Scripted(lambda _: object_answer(b"encrypted"), tls=served) for _ in range(2))
    with Environment({**aws_environment(f"https://127.0.0.1:{trusted.port}"), "AWS_CA_BUNDLE": ca}):
        assert url_reads.get_object("s3://tls-bucket/a b.jpg").tobytes() == b"encrypted"
    assert trusted.requests == ["GET /tls-bucket/a%20b.jpg HTTP/1.1"]   # path style: the bucket in the path
    with Environment(aws_environment(f"https://127.0.0.1:{unknown.port}")):   # the system's CAs: not this one
        with pytest.raises(storage.StorageError, match=r"the object store at https://127.0.0.1:\d+ for "
                                                       r"s3://tls-bucket/a.jpg presents a certificate no trusted "
                                                       r"CA signed; set AWS_CA_BUNDLE") as e:
            url_reads.get_object("s3://tls-bucket/a.jpg")
    one_line(e.value)
    assert unknown.requests == []
    trusted.close()
    unknown.close()


def test_a_server_that_never_answers_is_named_after_the_librarys_limits(monkeypatch):
    """obstore's own defaults wait minutes; the library's: READ_TIMEOUT_S an attempt, retried
    for RETRY_WINDOW_S (both made short here), then one line naming the URL and the store."""
    monkeypatch.setattr(s3_client, "READ_TIMEOUT_S", 1)
    monkeypatch.setattr(s3_client, "RETRY_WINDOW_S", 2)
    hung = Scripted(lambda _: None)
    with Environment(aws_environment(f"http://127.0.0.1:{hung.port}")):
        with pytest.raises(storage.StorageError, match=rf"cannot reach the object store at http://127.0.0.1:{hung.port}"
                                                       rf" for s3://hung/a.jpg \(no answer in time, retried") as e:
            url_reads.get_object("s3://hung/a.jpg")
    one_line(e.value)
    assert len(hung.requests) >= 2   # tried again within the window
    hung.close()


def test_a_failing_server_is_tried_again_and_a_refusal_is_not(monkeypatch):
    """HTTP 503 then the object: read; a 403 is said at once, asked once."""
    answers = iter([b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n"] * 2 + [object_answer(b"ok")])
    flaky = Scripted(lambda _: next(answers))
    with Environment(aws_environment(f"http://127.0.0.1:{flaky.port}")):
        assert url_reads.get_object("s3://flaky/a.jpg").tobytes() == b"ok"
    assert len(flaky.requests) == 3
    refusing = Scripted(lambda _: b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    with Environment(aws_environment(f"http://127.0.0.1:{refusing.port}")):
        with pytest.raises(storage.StorageError, match="access to s3://flaky/a.jpg was denied"):
            url_reads.get_object("s3://flaky/a.jpg")
    assert len(refusing.requests) == 1
    flaky.close()
    refusing.close()


def test_no_credentials_anywhere_is_said_with_what_to_set(monkeypatch, tmp_path):
    needs_s3_extra()   # the library's credentials and signed reads are boto3's
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with Environment({**{k: v for k, v in aws_environment("http://127.0.0.1:9").items() if "KEY" not in k},
                      "HOME": str(tmp_path)}):   # no ~/.aws either
        with pytest.raises(storage.StorageError, match=r"no credentials for s3://any/a.jpg: set AWS_ACCESS_KEY_ID"):
            url_reads.get_object("s3://any/a.jpg")


CHILD = """
import json, os, sys
from dali_loaders.bench import storage
cpus = os.sched_getaffinity(0)
result = storage.run("tiny", threads=1, rounds=1, cache_dir=sys.argv[1])
result["cpus_kept"] = all(os.sched_getaffinity(int(t)) == cpus for t in os.listdir("/proc/self/task"))
result["cpus"], result["table"] = sorted(cpus), storage.table(result)
print(json.dumps(result))
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_storage_bench_counts_one_get_an_image_and_leaves_the_cpus_as_they_were(tmp_path):
    """bench --storage s3 --tiny (its own process: DALI keeps the S3 endpoint it first reads):
    five rows of the same images; the server's own counts say one GET an image through the
    library and more through DALI's reader (a size, then the bytes)."""
    needs_s3_extra()   # the library's credentials and signed reads are boto3's
    import json
    import subprocess
    import sys

    from subprocess_env import subprocess_env

    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=subprocess_env(), capture_output=True,
                          text=True, timeout=600)   # its images in tmp_path, not the user's cache
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


