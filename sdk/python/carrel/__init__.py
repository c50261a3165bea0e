"""carrel: the Python SDK of carrel's full-VM desktop sandboxes.

    from carrel import Sandbox

    with Sandbox.create(template="tiny") as sb:
        png = sb.screenshot()
        sb.left_click(500, 330)
        sb.write("echo hello > /tmp/t\\n")
        print(sb.commands.run("cat /tmp/t").stdout)

:class:`Client` / :class:`AsyncClient` speak the whole REST API; :class:`Sandbox` /
:class:`AsyncSandbox` wrap one session with E2B Desktop's verbs. Errors are typed by the API's
error code (:class:`NotFound`, :class:`WrongState`, ...; all :class:`CarrelError`).
"""

__version__ = "0.1.0"

from ._shell import Shell  # noqa: E402
from .client import AsyncClient, Client, CommandResult, input_file  # noqa: E402
from .errors import (  # noqa: E402
    ERRORS_BY_CODE,
    Busy,
    CarrelError,
    CommandFailed,
    DiskError,
    Exists,
    Failed,
    Forbidden,
    Gone,
    HypervisorError,
    InternalError,
    NoSpace,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    Overloaded,
    PolicyDenied,
    RateLimited,
    StoreError,
    Timeout,
    Unauthorized,
    Unreachable,
    Unsupported,
    WrongState,
    error_from_reply,
)
from .sandbox import (  # noqa: E402
    AsyncCommands,
    AsyncFiles,
    AsyncSandbox,
    Commands,
    Files,
    Process,
    Sandbox,
)

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "CommandResult",
    "input_file",
    "Sandbox",
    "AsyncSandbox",
    "Commands",
    "Files",
    "Process",
    "Shell",
    "AsyncCommands",
    "AsyncFiles",
    "CarrelError",
    "ERRORS_BY_CODE",
    "error_from_reply",
    "InvalidArgument",
    "Unauthorized",
    "Forbidden",
    "PolicyDenied",
    "NotFound",
    "Exists",
    "WrongState",
    "Busy",
    "Gone",
    "LimitExceeded",
    "RateLimited",
    "Overloaded",
    "Unsupported",
    "Timeout",
    "HypervisorError",
    "DiskError",
    "StoreError",
    "InternalError",
    "NoSpace",
    "Failed",
    "Unreachable",
    "CommandFailed",
]
