"""Turns Azure SDK exceptions into dagq errors with messages that say what to fix.

Adapters handle the outcomes they expect (a missing container, a lost compare-and-swap)
themselves; everything else goes through :class:`Guard`, which maps network failures and
rejected credentials to ``StoreUnavailable`` naming the setting to check.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

from dagq.errors import (
    AlreadyExists,
    DagqError,
    MissingRight,
    NotFound,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
)

ROLES = {
    "blob": "Storage Blob Data Contributor",
    "queue": "Storage Queue Data Contributor",
    "table": "Storage Table Data Contributor",
    "servicebus": "Azure Service Bus Data Sender' and 'Azure Service Bus Data Receiver",
}
MANAGE_RIGHT = (
    "queue lengths and the list of queues come from Service Bus management calls, which need "
    "the Manage right; the Data Sender and Data Receiver roles the deployment grants do not "
    "include it. Run this as an identity that holds 'Azure Service Bus Data Owner' on the "
    "namespace (the only built-in role with Manage, see https://learn.microsoft.com/azure/"
    "service-bus-messaging/service-bus-managed-service-identity), or with a connection "
    "string whose policy has Manage")


@contextmanager
def manage_right(what: str) -> Iterator[None]:
    """Run a Service Bus management call; an access refusal names the Manage right."""
    try:
        yield
    except AzureError as exc:
        if isinstance(exc, ClientAuthenticationError) or status_of(exc) in (401, 403):
            raise MissingRight(f"{what}: access refused: {MANAGE_RIGHT}") from None
        raise


@dataclass(frozen=True)
class Guard:
    """Error translation for one service of one store (``blob``, ``queue``, ``table``,
    ``servicebus``)."""

    service: str
    """Which service the guarded calls talk to."""
    endpoint: str
    """Where it lives (account or namespace URL), for messages."""
    setting: str
    """The URL setting that chose the endpoint, with its value (``DAGQ_STORE='...'``)."""
    secret_var: str | None
    """The connection-string variable in use, or ``None`` with ``DefaultAzureCredential``."""

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        """Run the block, re-raising Azure errors as dagq errors about ``what``."""
        try:
            yield
        except DagqError:
            raise
        except AzureError as exc:
            raise self.translate(exc, what) from None

    def translate(self, exc: AzureError, what: str) -> DagqError:
        """The dagq error for ``exc`` raised while ``what``."""
        status = getattr(exc, "status_code", None)
        detail = _first_line(exc)
        if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
            return StoreUnavailable(f"{what}: {self.endpoint} refused access ({detail}). "
                                    + self._credential_hint())
        if isinstance(exc, ServiceRequestError | ServiceResponseError):
            return StoreUnavailable(
                f"{what}: cannot reach {self.endpoint} ({detail}). Check {self.setting}"
                + (f" and the endpoints in {self.secret_var}" if self.secret_var else "")
                + ", and that the service is running and reachable from this machine"
            )
        if isinstance(exc, ResourceNotFoundError):
            return NotFound(f"{what}: not found ({detail})")
        if isinstance(exc, ResourceExistsError):
            return AlreadyExists(f"{what}: already exists ({detail})")
        if isinstance(exc, ResourceModifiedError) or status == 412:
            return PreconditionFailed(f"{what}: changed by another writer ({detail})")
        if isinstance(exc, HttpResponseError) and status in (429, 500, 503):
            return StoreUnavailable(
                f"{what}: {self.endpoint} stayed busy or failing after retries (HTTP {status}: "
                f"{detail}); try again later or reduce the load"
            )
        return StoreError(f"{what}: {self.service} request failed ({type(exc).__name__}: "
                          f"{detail})")

    def _credential_hint(self) -> str:
        if self.secret_var:
            return (f"Check the key or SAS in {self.secret_var} (it must belong to the "
                    f"account in {self.setting}) and that it has not expired or been rotated.")
        role = ROLES.get(self.service, "a data role")
        return (f"dagq signed in with DefaultAzureCredential: make sure one of its sources "
                f"works (az login, managed identity, AZURE_CLIENT_ID/AZURE_TENANT_ID/"
                f"AZURE_CLIENT_SECRET) and that the identity holds '{role}' on the resource "
                f"named by {self.setting}, or set a connection string instead.")


def status_of(exc: AzureError) -> int | None:
    """HTTP status of ``exc`` if it came from a response."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line[:200]
