"""Lazy access to Ray (the optional ``[dist]`` extra) and cluster connection with clear errors."""

from __future__ import annotations

import socket
from typing import Any

from ..errors import ClusterError, InvalidArgumentError, MissingDependencyError


def require_ray() -> Any:
    """Import and return the ``ray`` module.

    Returns
    -------
    module
        ``ray``.

    Raises
    ------
    MissingDependencyError
        Ray is not installed (an ImportError that says how to install it).
    """
    try:
        import ray
    except ImportError as err:
        raise MissingDependencyError.for_extra(
            "tumorboard.dist (Ray)", package="ray", extra="dist", cause=err
        ) from err
    return ray


def connect(address: str | None = None, **init_kwargs: Any) -> Any:
    """Connect to a Ray cluster, or start a local one, and return the ``ray`` module.

    When this process is already connected, the existing connection is reused.

    Parameters
    ----------
    address : str, optional
        The cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``); None starts a local
        one.
    **init_kwargs
        Passed to ``ray.init`` (``log_to_driver`` defaults to False).

    Returns
    -------
    module
        ``ray``, connected.

    Raises
    ------
    MissingDependencyError
        Ray is not installed (an ImportError naming ``pip install tumorboard[dist]``).
    ClusterError
        The address is unreachable or ``ray.init`` failed (a ConnectionError); the message
        names the address.
    InvalidArgumentError
        ``address`` is neither None nor a non-empty string.
    """
    ray = require_ray()
    if address is not None and (not isinstance(address, str) or not address):
        raise InvalidArgumentError(
            f"ray_address: expected None or an address string, got {address!r}"
        )
    if address is not None:
        check_reachable(address)
    if ray.is_initialized():
        return ray
    kwargs = {"log_to_driver": False, **init_kwargs}
    try:
        ray.init(address=address, **kwargs)
    except Exception as err:  # Ray raises ConnectionError, RuntimeError, ValueError, ...
        where = "a new local Ray instance" if address is None else f"the Ray cluster at {address!r}"
        raise ClusterError(
            f"could not connect to {where}: {type(err).__name__}: {err} (is `ray start --head` "
            "running there, and is the address reachable from this machine?)"
        ) from err
    return ray


def check_reachable(address: str, *, timeout: float = 5.0) -> None:
    """Check that a Ray address accepts a TCP connection, failing at once if not.

    ``ray.init`` itself retries an unreachable address for minutes before failing; this check
    answers at once. Addresses without a port ("auto", a local session) are left to Ray.

    Parameters
    ----------
    address : str
        ``host:port`` or ``ray://host:port``.
    timeout : float, default 5.0
        Seconds to wait for the connection.

    Raises
    ------
    ClusterError
        No TCP connection within ``timeout`` seconds (a ConnectionError naming ``address``).
    """
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise ClusterError(
            f"cannot reach the Ray cluster at {address!r}: {err} (is `ray start --head` "
            "running there, and is the port open from this machine?)"
        ) from err
