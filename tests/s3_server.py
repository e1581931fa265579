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


def needs_boto3() -> None:
    """Skips the test where boto3 (the s3 extra's: the server's client, the library's listings)
    is not installed."""
    pytest.importorskip("boto3", reason="boto3 comes with the s3 extra: pip install dali_loaders[s3]")


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
    needs_boto3()
    server = ProxiedServer(str(tmp_path_factory.mktemp("seaweedfs")))
    server.start()
    server.start_proxy()
    try:
        with Environment(aws_environment(server.proxy.endpoint)):
            yield server
    finally:
        server.proxy.stop()
        server.stop()
