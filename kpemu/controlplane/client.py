"""A Kubernetes API client on the standard library (urllib + ssl): JSON in and out, a bearer token, and
the API server's own certificate as the only CA trusted."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ApiError(Exception):
    """The API server answered with an error status (or did not answer)."""

    def __init__(self, method: str, path: str, status: int, message: str):
        self.status = status
        self.reason = message
        super().__init__(f"{method} {path}: {status or 'no answer'}: {message}")


@dataclass(frozen=True)
class Client:
    server: str  # https://127.0.0.1:PORT
    token: str
    ca: Path

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """One request; the decoded JSON answer (or the text, for /readyz and the like)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(req, context=self._context(), timeout=timeout) as res:
                text = res.read().decode()
        except urllib.error.HTTPError as e:
            raise ApiError(method, path, e.code, _message(e.read().decode(errors="replace"))) from None
        except (urllib.error.URLError, OSError) as e:
            raise ApiError(method, path, 0, str(getattr(e, "reason", e))) from None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


def _message(text: str) -> str:
    """The `message` of a Kubernetes Status answer, else the text itself (shortened)."""
    try:
        return str(json.loads(text).get("message") or text)[:600]
    except (ValueError, AttributeError):
        return text[:600]
