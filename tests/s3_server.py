"""The `s3_server` fixture: a SeaweedFS S3 server (dali_loaders.testing.object_store) for the
session, the AWS environment pointing at it while the tests run, stopped at the end."""
import pytest

from dali_loaders.testing.object_store import (  # noqa: F401  (the tests import these from here)
    ACCESS_KEY,
    SECRET_KEY,
    Environment,
    LoopbackProxy,
    WeedServer,
    aws_environment,
    free_ports,
    identities_file,
)


class Requests:
    """The requests the library makes through obstore while in the block, as S3 names them
    (GetObject, HeadObject, ListObjectsV2), each with the Range it asks for (or None):
    obstore's functions wrapped where the library looks them up."""

    CALLS = {"get": "GetObject", "get_range_async": "GetObject", "head": "HeadObject", "list": "ListObjectsV2",
             "list_with_delimiter": "ListObjectsV2"}

    def __init__(self):
        self.calls, self.saved = [], {}

    def __enter__(self):
        import obstore

        for function, name in self.CALLS.items():
            self.saved[function] = original = getattr(obstore, function)
            setattr(obstore, function, self._counting(original, name))
        return self

    def _counting(self, original, name):
        def counted(store, path=None, *args, options=None, **kwargs):
            wanted = (options or {}).get("range")
            if "start" in kwargs:   # get_range_async(store, path, start=, end=)
                wanted = (kwargs["start"], kwargs["end"])
            if isinstance(wanted, tuple):
                wanted = f"bytes={wanted[0]}-{wanted[1] - 1}"
            elif isinstance(wanted, dict):
                wanted = f"bytes={wanted['offset']}-"
            self.calls.append((name, wanted))
            if options is not None:
                kwargs["options"] = options
            return original(store, path, *args, **kwargs)
        return counted

    def __exit__(self, *exc):
        import obstore

        for function, original in self.saved.items():
            setattr(obstore, function, original)

    def count(self, name):
        return sum(1 for n, _ in self.calls if n == name)

    @property
    def ranges(self):
        return [r for _, r in self.calls]


def needs_s3_extra() -> None:
    """Skips the test where the s3 extra is not installed: obstore (the library's reads and
    listings) and boto3 (its credential chain, and the test server's client)."""
    pytest.importorskip("boto3", reason="boto3 comes with the s3 extra: pip install dali_loaders[s3]")
    pytest.importorskip("obstore", reason="obstore comes with the s3 extra: pip install dali_loaders[s3]")


class ProxiedServer(WeedServer):
    """A WeedServer with a LoopbackProxy in front of its S3 port (`proxy`, from start_proxy())."""

    def __init__(self, folder: str):
        super().__init__(folder)
        self.proxy = None

    def start_proxy(self) -> None:
        self.proxy = LoopbackProxy(self.s3)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A running SeaweedFS S3 server behind a loopback proxy (`server.proxy`: counts requests,
    can be slowed), the AWS environment pointing at the proxy. One endpoint for the session:
    DALI's S3 client keeps the endpoint it first read for the life of the process. A test
    that stops the server starts it again (same data, same ports)."""
    needs_s3_extra()
    server = ProxiedServer(str(tmp_path_factory.mktemp("seaweedfs")))
    server.start()
    server.start_proxy()
    try:
        with Environment(aws_environment(server.proxy.endpoint)):
            yield server
    finally:
        server.proxy.stop()
        server.stop()
