"""Typed errors of carreld's API.

carreld answers every failure with an envelope ``{"error": {"code": ..., "message": ...}}`` and
an ``X-Request-Id`` header. The SDK raises one exception class per code, all subclasses of
:class:`CarrelError`, so callers can ``except carrel.NotFound`` instead of reading status codes.
"""

from __future__ import annotations

from typing import Any, Mapping


class CarrelError(Exception):
    """Base class of every error the SDK raises.

    Attributes:
        code: the API's error code (``"not_found"``, ``"wrong_state"``, ...), or
            ``"unreachable"`` when carreld could not be reached at all.
        status: the HTTP status (``None`` when there was no reply).
        message: carreld's message, which names what was refused and why.
        request_id: the ``X-Request-Id`` of the reply, to find the request in carreld's log.
    """

    code: str = "failed"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        where = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )


class InvalidArgument(CarrelError):
    """400 ``invalid_argument``: malformed JSON, a bad member, name, path or coordinate."""

    code = "invalid_argument"


class Unauthorized(CarrelError):
    """401 ``unauthorized``: no token, or a wrong, expired or revoked one."""

    code = "unauthorized"


class Forbidden(CarrelError):
    """403 ``forbidden``: the token's role may not do this (or a foreign ``Origin``)."""

    code = "forbidden"


class PolicyDenied(CarrelError):
    """403 ``policy_denied``: the session's or the token's policy refuses it."""

    code = "policy_denied"


class NotFound(CarrelError):
    """404 ``not_found``: unknown session, template, snapshot, job, file or route.

    An agent token also gets it for another principal's session.
    """

    code = "not_found"


class Exists(CarrelError):
    """409 ``exists``: the name is already used."""

    code = "exists"


class WrongState(CarrelError):
    """409 ``wrong_state``: the session's state does not allow the verb (the message names
    the state), or a person holds the session's control lease."""

    code = "wrong_state"


class Busy(CarrelError):
    """409 ``busy``: another operation holds the session or template; retry later."""

    code = "busy"


class Gone(CarrelError):
    """410 ``gone``: it existed and is gone for good: a console ticket that was used up or
    expired, a screenshot pruned by the session's budget."""

    code = "gone"


class LimitExceeded(CarrelError):
    """413 ``limit_exceeded``: a body or value over a limit.

    Also 429 with the same code when failed credentials from one address are slowed down;
    ``retry_after`` then holds the seconds to wait (from the ``Retry-After`` header).
    """

    code = "limit_exceeded"

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class RateLimited(LimitExceeded):
    """429 ``rate_limited``: the token is over one of carreld's ``[limits]`` (sessions owned,
    concurrent creates and forks, requests per second); the message names the limit and
    ``retry_after`` holds the seconds to wait."""

    code = "rate_limited"


class Overloaded(CarrelError):
    """503 ``overloaded``: carreld has too many requests of this kind (quick reads, long VM
    operations, exec) queued already; ``retry_after`` holds the seconds to wait."""

    code = "overloaded"

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class Unsupported(CarrelError):
    """501 ``unsupported``: the backend cannot do it (e.g. libvirt's test driver, or an
    image without a guest agent)."""

    code = "unsupported"


class Timeout(CarrelError, TimeoutError):
    """504 ``timeout``: the guest or a tool did not answer in time; also raised when the
    HTTP request itself timed out."""

    code = "timeout"


class HypervisorError(CarrelError):
    """500 ``hypervisor_error``: libvirt or QEMU failed."""

    code = "hypervisor_error"


class DiskError(CarrelError):
    """500 ``disk_error``: an image or overlay operation failed."""

    code = "disk_error"


class StoreError(CarrelError):
    """500 ``store_error``: carreld's state database failed."""

    code = "store_error"


class NoSpace(CarrelError):
    """507 ``no_space``: the host's disk is full (or below carreld's reserve); creates,
    snapshots and uploads are refused until there is room."""

    code = "no_space"


class InternalError(CarrelError):
    """500 ``internal``: a bug in carreld."""

    code = "internal"


class Failed(CarrelError):
    """500 ``failed``: the host failed in another way."""

    code = "failed"


class Unreachable(CarrelError, ConnectionError):
    """carreld could not be reached: no socket, connection refused, unknown host, TLS
    failure. ``status`` is ``None``."""

    code = "unreachable"


class CommandFailed(CarrelError):
    """A command run with ``check=True`` exited non-zero (or timed out); ``result`` holds
    its :class:`carrel.CommandResult`."""

    code = "command_failed"

    def __init__(self, message: str, *, result: Any, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.result = result


#: Every error code carreld emits, and the class raised for it.
ERRORS_BY_CODE: dict[str, type[CarrelError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        Unauthorized,
        Forbidden,
        PolicyDenied,
        NotFound,
        Exists,
        WrongState,
        Busy,
        Gone,
        LimitExceeded,
        RateLimited,
        Overloaded,
        Unsupported,
        Timeout,
        HypervisorError,
        DiskError,
        StoreError,
        NoSpace,
        InternalError,
        Failed,
    )
}

# When a reply has no envelope (a proxy in between, a crash): a class by status alone.
_BY_STATUS: dict[int, type[CarrelError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: InvalidArgument,
    409: WrongState,
    410: Gone,
    411: InvalidArgument,
    413: LimitExceeded,
    429: RateLimited,
    501: Unsupported,
    503: Overloaded,
    504: Timeout,
    507: NoSpace,
}


def error_from_reply(
    status: int,
    body: Any,
    request_id: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> CarrelError:
    """The typed exception for a non-2xx reply: its status, its parsed JSON body (or None)
    and its headers. A code the SDK does not know gives a plain :class:`CarrelError` with
    that code."""
    code = None
    message = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else None
        message = err.get("message") if isinstance(err.get("message"), str) else None
    if message is None:
        message = f"HTTP {status} from carreld"
    if code is not None:
        cls = ERRORS_BY_CODE.get(code, CarrelError)
    else:
        cls = _BY_STATUS.get(status, InternalError if status >= 500 else CarrelError)
        code = cls.code if cls is not CarrelError else "failed"
    kw: dict[str, Any] = {"code": code, "status": status, "request_id": request_id}
    if issubclass(cls, (LimitExceeded, Overloaded)):
        retry = (headers or {}).get("retry-after")
        try:
            kw["retry_after"] = float(retry) if retry is not None else None
        except ValueError:
            kw["retry_after"] = None
    return cls(message, **kw)
