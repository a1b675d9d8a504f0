"""Removes of one sandbox that race (a worker's reaper and a client's delete) all succeed: the
daemon's 409 Conflict ("removal already in progress") is told by its status, not its text.
(A real race needs a started sandbox per try and is not reliably hit: the daemon's answer is
stood in for, through the docker SDK's own error class.)"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.docker


def test_conflict_is_told_by_status_not_text(backend) -> None:
    """A 409 whatever its text is a remove already under way; any other failure is reported."""
    import requests
    from ale_rock.backends.docker import DockerBackendError

    def failing(status: int) -> Any:
        def remove_container(*args: Any, **kwargs: Any) -> Any:
            response = requests.Response()
            response.status_code = status
            raise backend._errors.APIError("daemon says something", response=response)

        return remove_container

    real = backend._api.remove_container
    try:
        backend._api.remove_container = failing(409)
        backend.remove("gone1")  # no error
        backend._api.remove_container = failing(500)
        with pytest.raises(DockerBackendError, match="cannot remove sandbox gone1"):
            backend.remove("gone1")
    finally:
        backend._api.remove_container = real
