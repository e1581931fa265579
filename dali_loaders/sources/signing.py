"""AWS Signature Version 4 for the GETs of a URL root's images, made here.

boto3 presigns a URL in about 100 us of Python (its event system, then the signature); the
signature itself is two SHA-256 hashes and an HMAC, under 10 us, with the key derived from
the secret once a day. At a thousand images a second that difference is a tenth of a core.
The form is the Authorization header (AWS's "Authenticating Requests: Using the
Authorization Header"), the payload hash that of an empty body, as botocore signs a GET.

Where a bucket's requests go (path or virtual-host addressing, the endpoint) is boto3's
decision: one URL it presigns, and sends nowhere, gives the bucket's base URL.
"""
import datetime
import hashlib
import hmac
import urllib.parse
from typing import Dict, Tuple

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_BODY_SHA256 = hashlib.sha256(b"").hexdigest()
UNRESERVED = "-_.~/"   # besides letters and digits, what S3's canonical URI leaves as it is


class GetSigner:
    """Signs GETs of the objects under `base_url` (scheme://host[:port]/path-to-the-bucket/)
    with the credentials of `credentials` (botocore's: refreshed when they are temporary)."""

    def __init__(self, base_url: str, region: str, credentials, service: str = "s3"):
        parts = urllib.parse.urlsplit(base_url)
        self.scheme, self.hostname, self.port = parts.scheme, parts.hostname, parts.port
        self.host = parts.netloc.rpartition("@")[2]   # the Host header: host[:port], never a user part
        self.prefix = parts.path if parts.path.endswith("/") else parts.path + "/"
        self.region, self.service, self.credentials = region, service, credentials
        self._keys: Dict[tuple, bytes] = {}

    def _signing_key(self, secret: str, day: str) -> bytes:
        found = self._keys.get((secret, day))
        if found is None:
            found = ("AWS4" + secret).encode()
            for part in (day, self.region, self.service, "aws4_request"):
                found = hmac.new(found, part.encode(), hashlib.sha256).digest()
            self._keys = {(secret, day): found}   # one key at a time: a new day or secret replaces it
        return found

    def sign(self, key: str, now: datetime.datetime = None) -> Tuple[str, Dict[str, str]]:
        """(the request's path, its headers) for a GET of object `key`."""
        frozen = self.credentials.get_frozen_credentials()
        now = now or datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        path = self.prefix + urllib.parse.quote(key, safe=UNRESERVED)
        headers = {"host": self.host, "x-amz-content-sha256": EMPTY_BODY_SHA256, "x-amz-date": stamp}
        if frozen.token:
            headers["x-amz-security-token"] = frozen.token
        names = ";".join(headers)   # already in sorted order
        canonical = "\n".join(("GET", path, "", *(f"{n}:{v}" for n, v in headers.items()), "", names,
                               EMPTY_BODY_SHA256))
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(frozen.secret_key, day), to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"{ALGORITHM} Credential={frozen.access_key}/{scope}, "
                                    f"SignedHeaders={names}, Signature={signature}")
        return path, headers

    def __repr__(self) -> str:   # never the credentials
        return f"GetSigner({self.scheme}://{self.host}{self.prefix}, region={self.region!r})"
