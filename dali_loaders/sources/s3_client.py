"""The object store's client: obstore (Python bindings of the Rust `object_store` crate, the
`[s3]` extra), set up from what the AWS tools read, with time limits and retries of the
library's choosing, its errors said in one line that names the URL.

Settings, as boto3 finds them: the endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, or the
profile's endpoint_url), the region (AWS_REGION, AWS_DEFAULT_REGION, the profile's), a CA
bundle (AWS_CA_BUNDLE, the profile's ca_bundle), addressing (path style, which SeaweedFS and
MinIO need and AWS serves; the profile's `s3 = addressing_style = virtual` for virtual
hosts). Credentials come from botocore's chain where boto3 is installed (the environment,
AWS_PROFILE with the shared files, SSO, a role, instance metadata), else from
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Nothing here prints or keeps a secret in text.

Time limits and retries (obstore's defaults would wait minutes on a hung server): a connect
must succeed in CONNECT_TIMEOUT_S, every read of an answer must receive something within
READ_TIMEOUT_S, and a request that failed for the network or the server (refused, reset,
timed out, HTTP 5xx, broken off mid-answer) is sent again, with backoff up to MAX_BACKOFF_S,
until RETRY_WINDOW_S has passed since it was first sent (request()): a store restarted within
30 s costs no error, a hung one is named within RETRY_WINDOW_S + READ_TIMEOUT_S. A refusal
(missing, denied) is not retried.
"""
import datetime
import os
import re
import time
from typing import Callable, NamedTuple, Optional

SCHEME = "s3://"
INSTALL = "pip install 'dali_loaders[s3]' (Python 3.11 or later)"
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 10          # nothing received for this long: the attempt fails (and is retried)
REQUEST_TIMEOUT_S = 3600     # a whole answer, body included (a WebDataset shard read front to back)
RETRY_WINDOW_S = 40          # a failed request is sent again until this long after its first try
MAX_BACKOFF_S = 2
PROBE_TIMEOUT_S = 5          # the one request that asks why DALI's read failed: one attempt
DEFAULT_REGION = "us-east-1"
TEMPORARY_CREDENTIALS_S = 300   # temporary credentials (a role, SSO) are asked for again this often


class StorageError(OSError):
    """Object storage failed for `url`: the message says what and what to do."""

    def __init__(self, message: str, url: str):
        super().__init__(redact(message))
        self.url = url


class ObjectNotFound(StorageError, FileNotFoundError):
    """The object (or bucket) a URL names does not exist."""


class BucketNotFound(ObjectNotFound):
    """The bucket a URL names does not exist (or the store does not know it yet)."""


class StoreUnreachable(StorageError):
    """The store could not be reached, or broke off an answer, for RETRY_WINDOW_S."""


class BatchTimeout(StorageError, TimeoutError):
    """A batch read from the store did not arrive within the bound (loader/deadline.py);
    `waiter`: the thread still waiting on the pipeline."""

    waiter = None


def redact(text: str) -> str:
    """`text` with any secret the environment holds replaced (a message from elsewhere may quote one)."""
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        secret = os.environ.get(name)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def split_url(url: str):
    """(bucket, key) of `s3://bucket/key`."""
    if url[:5].lower() == "gs://":
        raise StorageError(f"{url}: gs:// roots are not listed by this library; use GCS's S3-compatible endpoint "
                           f"(AWS_ENDPOINT_URL=https://storage.googleapis.com, HMAC keys) with s3:// URLs", url)
    bucket, _, key = url[len(SCHEME):].partition("/")
    if not bucket:
        raise StorageError(f"{url!r} names no bucket: expected s3://bucket/prefix", url)
    return bucket, key


# -- settings -----------------------------------------------------------------------------


class Settings(NamedTuple):
    endpoint: Optional[str]     # None: AWS S3
    region: str
    virtual_host: bool
    ca_bundle: Optional[str]    # a PEM file's path


class Credentials:
    """obstore's credential provider over botocore's credentials (refreshed by botocore when
    they are temporary). Its repr names no key."""

    def __init__(self, found):
        self.found = found
        self.temporary = hasattr(found, "refresh_needed")

    def __call__(self) -> dict:
        frozen = self.found.get_frozen_credentials()
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=TEMPORARY_CREDENTIALS_S)
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key, "token": frozen.token,
                "expires_at": until if self.temporary else None}

    def __repr__(self) -> str:
        return f"Credentials(temporary={self.temporary})"


def _aws_files():
    """botocore's session (AWS_PROFILE, the shared config and credentials files), or None
    where boto3 (and with it botocore) is not installed."""
    try:
        import botocore.session
    except ImportError:
        return None
    return botocore.session.Session()


def _profile(session, url: str) -> dict:
    if session is None:
        return {}
    try:
        return session.get_scoped_config()
    except Exception as e:  # botocore's ProfileNotFound, a config file it cannot parse
        raise StorageError(f"cannot read the AWS profile for {url} ({type(e).__name__}: {e}); check AWS_PROFILE "
                           f"and AWS_CONFIG_FILE", url) from None


def _first(*values) -> Optional[str]:
    return next((v for v in values if v), None)


_setups: dict = {}   # pid: (Settings, credentials)
_stores: dict = {}   # (pid, bucket, probe): obstore's store
_served: set = set()   # buckets that have answered this process (see request())


def _setup(url: str):
    """(Settings, credentials: obstore's config keys or a provider) of this process, read
    once; `url` only names what failed."""
    found = _setups.get(os.getpid())
    if found is None:
        found = _setups[os.getpid()] = _read_setup(url)
    return found


def _read_setup(url: str):
    session = _aws_files()
    profile = _profile(session, url)
    service = profile.get("s3") if isinstance(profile.get("s3"), dict) else {}
    env = os.environ
    settings = Settings(
        endpoint=_first(env.get("AWS_ENDPOINT_URL_S3"), env.get("AWS_ENDPOINT_URL"), service.get("endpoint_url"),
                        profile.get("endpoint_url")),
        region=_first(env.get("AWS_REGION"), env.get("AWS_DEFAULT_REGION"), profile.get("region")) or DEFAULT_REGION,
        virtual_host=str(service.get("addressing_style", "path")).lower() == "virtual",
        ca_bundle=_first(env.get("AWS_CA_BUNDLE"), profile.get("ca_bundle")))
    if session is not None:
        try:
            found = session.get_credentials()
        except Exception as e:  # botocore's: an SSO session expired, a credential process that failed
            raise StorageError(f"cannot get credentials for {url} ({type(e).__name__}); check AWS_PROFILE and "
                               f"~/.aws/config (`aws sso login` for SSO)", url) from None
        keys = Credentials(found) if found is not None else None
    elif env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        keys = {"access_key_id": env["AWS_ACCESS_KEY_ID"], "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
                **({"token": env["AWS_SESSION_TOKEN"]} if env.get("AWS_SESSION_TOKEN") else {})}
    else:
        keys = None
    if keys is None:
        extra = "" if session is not None else " (profiles and the shared files need boto3: " + INSTALL + ")"
        raise StorageError(f"no credentials for {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                           f"AWS_PROFILE with ~/.aws/credentials{extra}", url)
    return settings, keys


def settings(url: str = SCHEME) -> Settings:
    return _setup(url)[0]


def endpoint() -> str:
    """Where requests go, without any user:password part."""
    try:
        chosen = settings().endpoint
    except StorageError:
        chosen = None
    return re.sub(r"//[^/@]*@", "//", chosen) if chosen else "AWS"


def _obstore(url: str):
    try:
        import obstore
        from obstore.store import S3Store
    except ImportError:
        raise ImportError(f"reading {url} needs the obstore client: {INSTALL}") from None
    return obstore, S3Store


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


def _new_store(bucket: str, url: str, probe: bool):
    _, S3Store = _obstore(url)
    chosen, keys = _setup(url)
    config = {"region": chosen.region, "virtual_hosted_style_request": chosen.virtual_host}
    if chosen.endpoint:
        config["endpoint"] = chosen.endpoint
    options = {"connect_timeout": _seconds(PROBE_TIMEOUT_S if probe else CONNECT_TIMEOUT_S),
               "read_timeout": _seconds(PROBE_TIMEOUT_S if probe else READ_TIMEOUT_S),
               "timeout": _seconds(PROBE_TIMEOUT_S if probe else REQUEST_TIMEOUT_S),
               "allow_http": bool(chosen.endpoint and chosen.endpoint.lower().startswith("http://"))}
    if chosen.ca_bundle:
        try:
            with open(chosen.ca_bundle) as f:
                options["root_certificate"] = f.read()
        except OSError as e:
            raise StorageError(f"cannot read the CA bundle {chosen.ca_bundle} (AWS_CA_BUNDLE) for {url}: "
                               f"{e.strerror}", url) from None
    retry = {"max_retries": 0} if probe else {
        "max_retries": 1000, "retry_timeout": _seconds(RETRY_WINDOW_S),   # the window bounds them, not the count
        "backoff": {"init_backoff": _seconds(0.1), "max_backoff": _seconds(MAX_BACKOFF_S), "base": 2}}
    provider = keys if isinstance(keys, Credentials) else None
    if provider is None:
        config.update(keys)
    try:
        return S3Store(bucket, config=config, client_options=options, retry_config=retry,
                       credential_provider=provider)
    except Exception as e:  # obstore's: a bad endpoint URL, a certificate it cannot parse
        raise StorageError(f"cannot set up the object store client for {url}: {_first_line(e)}; check "
                           f"AWS_ENDPOINT_URL, AWS_REGION and AWS_CA_BUNDLE", url) from None


_started_in: Optional[int] = None   # the process whose obstore threads run (a forked child inherits the number)


def started_here() -> bool:
    """Whether this process has used obstore: its threads do not survive fork(), so a child
    forked from now on cannot read the store (DataLoader workers need forkserver or spawn)."""
    return _started_in == os.getpid()


def store(url: str, probe: bool = False):
    """obstore's store for the bucket of `url` in this process; `probe`: one attempt, short
    limits, for asking why a read failed."""
    global _started_in
    if _started_in is not None and _started_in != os.getpid():
        raise StorageError(f"cannot read {url} in a process forked from one that had read object storage: "
                           f"obstore's threads do not survive fork() (it would hang). Give DataLoader "
                           f"multiprocessing_context='forkserver' (or 'spawn')", url)
    _started_in = os.getpid()
    key = (_started_in, split_url(url)[0], probe)
    found = _stores.get(key)
    if found is None:   # two threads may both make one: the same store, one kept
        found = _stores[key] = _new_store(key[1], url, probe)
    return found


def module(url: str):
    """obstore itself (its get, head, list functions), or an ImportError saying how to install it."""
    return _obstore(url)[0]


def forget() -> None:
    """Settings and stores dropped: the next request reads the environment afresh."""
    _setups.clear()
    _stores.clear()
    _served.clear()


def request(url: str, send: Callable):
    """send() (one obstore call for `url`), its failure said by failure(). obstore retries a
    request that fails before its answer comes; one broken off mid-answer (a server stopped
    while it sends), and a bucket that has answered before and is now said not to exist (a
    store starting up: SeaweedFS says NoSuchBucket until it has loaded its buckets), are sent
    again here, until RETRY_WINDOW_S has passed since the first try."""
    bucket, deadline = split_url(url)[0], time.monotonic() + RETRY_WINDOW_S
    while True:
        try:
            answer = send()
        except Exception as e:  # obstore's exceptions (and ours, as they are)
            said = failure(e, url)
            again = isinstance(said, StoreUnreachable) or (isinstance(said, BucketNotFound) and bucket in _served)
            if not again or time.monotonic() > deadline:
                raise said from None
            time.sleep(MAX_BACKOFF_S / 4)
            continue
        _served.add(bucket)
        return answer


# -- errors -------------------------------------------------------------------------------


def _first_line(e: Exception) -> str:
    return redact(str(e).strip().split("\n", 1)[0])[:200]


CODE = re.compile(r"<Code>([A-Za-z0-9.]{1,64})</Code>")
STATUS = re.compile(r"status code: (\d{3})")
KIND = re.compile(r"HttpError \{\s*kind: (\w+)")
REACH = {"Connect": "connection refused or failed", "Timeout": "no answer in time", "Request": "request failed",
         "Decode": "answer cut off", "Interrupted": "connection closed mid-answer",
         "Unknown": "connection broken off"}
CERTIFICATE = re.compile(r"certificate|UnknownIssuer|CaUsedAsEndEntity|NotValidForName", re.IGNORECASE)


def failure(e: Exception, url: str) -> OSError:
    """A short StorageError naming `url` for what obstore raised (its text holds the server's
    XML and a debug dump; only the S3 error code and the kind of failure are kept); our own
    errors, and the ImportError that says how to install the client, as they are."""
    if isinstance(e, (StorageError, ImportError)):
        return e
    text = str(e)
    code = CODE.search(text)
    code = code.group(1) if code else ""
    status = STATUS.search(text)
    status = int(status.group(1)) if status else None
    if code == "NoSuchBucket":
        return BucketNotFound(f"bucket {split_url(url)[0]!r} of {url} does not exist at {endpoint()}; check the URL "
                              f"and AWS_ENDPOINT_URL", url)
    if isinstance(e, FileNotFoundError) or code in ("NoSuchKey", "NotFound") or status == 404:
        return ObjectNotFound(f"{url} does not exist", url)
    names = {t.__name__ for t in type(e).__mro__}   # obstore's exception classes, by name: no import here
    if names & {"PermissionDeniedError", "UnauthenticatedError"} or status in (401, 403) or code in (
            "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"):
        return StorageError(f"access to {url} was denied{f' ({code})' if code else ''}; check the credentials "
                            f"(AWS_ACCESS_KEY_ID, AWS_PROFILE) and the bucket's policy", url)
    kind = KIND.search(text)
    if CERTIFICATE.search(text) and not code:
        return StorageError(f"the object store at {endpoint()} for {url} presents a certificate no trusted CA "
                            f"signed; set AWS_CA_BUNDLE to its CA's PEM file", url)
    if kind or (status and status >= 500):
        why = REACH.get(kind.group(1), kind.group(1)) if kind else f"HTTP {status}"
        return StoreUnreachable(f"cannot reach the object store at {endpoint()} for {url} ({why}, retried for "
                            f"{RETRY_WINDOW_S} s); check AWS_ENDPOINT_URL and that the server is up", url)
    if code or status:
        return StorageError(f"{url}: the object store answered {code or f'HTTP {status}'}", url)
    return StorageError(f"{url}: {type(e).__name__}: {_first_line(e)}", url)
