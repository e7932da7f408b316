"""A loopback stand-in for the Hugging Face Hub, for tests that must run offline.

It speaks the subset of the Hub HTTP protocol that the real ``huggingface_hub`` (2.x) and ``transformers`` (5.x)
clients use for ``create_repo``, ``upload_folder``/``create_commit`` (regular and LFS uploads), ``push_to_hub``,
``ModelCard.push_to_hub``, ``hf_hub_download``, ``snapshot_download`` and ``from_pretrained("org/name")``.
Files live in memory; every commit gets a fresh 40-hex sha and old commits stay readable.

In-process use::

    with LoopbackHub() as hub, use_loopback_hub(hub, cache_dir=tmp_path / "hf-cache"):
        model.push_to_hub("org/tiny")
        BertModel.from_pretrained("org/tiny")

Faults for error-path tests: ``with hub.fail(500, method="POST", path=r"/api/models/.*/commit/.*"): ...`` answers the
matching requests with that status (the client retries 5xx on preupload and LFS for ~20 s, not on create or commit).

Subprocess clients: pass ``env={**os.environ, **hub.env(cache_dir)}``. Standalone server for demos:
``python -m hf_jepa.testing.hub_server --port 8765`` (``--port 0`` picks a free port; the first stdout line is
``LOOPBACK_HUB_URL=http://127.0.0.1:PORT``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["LoopbackHub", "use_loopback_hub", "main", "FAKE_TOKEN"]

FAKE_TOKEN = "hf_loopbackFakeToken0000000000000000"
USER = "loopback-user"  # namespace for `create_repo("name")` without an organization
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".onnx", ".npz", ".parquet", ".arrow")
LFS_THRESHOLD = 10 * 1024 * 1024
GITATTRIBUTES = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES).encode()
PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}  # URL prefix of resolve / .git routes
_T = "(models|datasets|spaces)"
ROUTES = [  # (method, regex, handler name); first match wins
    ("POST", r"/api/repos/create", "create_repo"),
    ("POST", r"/api/validate-yaml", "validate_yaml"),
    ("GET", r"/api/agent-harnesses", "agent_harnesses"),
    ("GET", rf"/api/{_T}/([^/]+/[^/]+)(?:/revision/([^/]+))?", "info"),
    ("GET", rf"/api/{_T}/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", "tree"),
    ("POST", rf"/api/{_T}/([^/]+/[^/]+)/preupload/([^/]+)", "preupload"),
    ("POST", rf"/api/{_T}/([^/]+/[^/]+)/commit/([^/]+)", "commit"),
    ("POST", rf"/api/{_T}/([^/]+/[^/]+)/branch/([^/]+)", "branch"),
    ("POST", r"/(?:(datasets|spaces)/)?([^/]+/[^/]+?)\.git/info/lfs/objects/batch", "lfs_batch"),
    ("PUT", r"/_lfs/([0-9a-f]{64})", "lfs_put"),
    ("GET", r"/(?:(datasets|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", "resolve"),
]


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(eq=False)
class _Blob:
    data: bytes
    lfs: bool

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def pointer(self) -> bytes:  # the git-lfs pointer a real Hub stores in git for LFS files
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    @cached_property
    def oid(self) -> str:  # git blob id: of the pointer for LFS files, of the content otherwise
        return _git_oid(self.pointer if self.lfs else self.data)


@dataclass
class _Repo:
    type: str
    refs: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    commits: dict[str, dict[str, _Blob]] = field(default_factory=dict)  # commit sha -> {path: blob}


@dataclass(eq=False)
class _Fault:
    status: int
    method: str | None
    path: re.Pattern
    times: int | None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (
            (self.method is None or self.method == method)
            and self.path.fullmatch(path) is not None
            and (self.times is None or self.hits < self.times)
        )


class HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class LoopbackHub:
    """Context manager: starts the server on 127.0.0.1 with a free port in a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.host, self.port = host, port
        self.url = ""
        self.requests: list[tuple[str, str]] = []  # (method, path) log, e.g. ("PUT", "/_lfs/<sha256>")
        self._repos: dict[tuple[str, str], _Repo] = {}  # (repo type, "ns/name") -> repo
        self._lfs: dict[str, bytes] = {}  # sha256 -> content, filled by LFS PUTs
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._faults: list[_Fault] = []  # injected failures, checked before routing (see `fail`)

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> LoopbackHub:
        handler = type("Handler", (_Handler,), {"hub": self})
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="loopback-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LoopbackHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- fault injection -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def fail(
        self, status: int = 500, *, method: str | None = None, path: str = ".*", times: int | None = None
    ) -> Iterator[_Fault]:
        """Inside the block, requests whose method is `method` (any if None) and whose URL path matches the regex
        `path` are answered with `status` (and an ``X-Error-Message``) instead of being served, `times` times at most
        (None: every time). Yields the fault; its `hits` counts the requests it answered. Example::

            with hub.fail(500, method="POST", path=r"/api/models/.*/commit/.*"):
                push_to_hub(folder, "org/x")  # raises HfHubHTTPError
        """
        fault = _Fault(status, method, re.compile(path), times)
        with self._lock:
            self._faults.append(fault)
        try:
            yield fault
        finally:
            with self._lock:
                self._faults.remove(fault)

    def _injected_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    # ---- inspection ------------------------------------------------------------------------------------------
    def files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> dict[str, bytes]:
        """What is stored in `repo_id` at `revision` (branch or commit sha), as {path: bytes}."""
        return {p: b.data for p, b in self._tree(self._repo(repo_type, repo_id), revision)[1].items()}

    def env(self, cache_dir: str | os.PathLike | None = None) -> dict[str, str]:
        """Environment variables pointing a *fresh* Python process (subprocess) at this server."""
        env = {
            "HF_ENDPOINT": self.url,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_OFFLINE": "0",
            "TRANSFORMERS_OFFLINE": "0",
            "HF_TOKEN": FAKE_TOKEN,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        if cache_dir is not None:
            env["HF_HUB_CACHE"] = str(cache_dir)
        return env

    # ---- storage helpers -------------------------------------------------------------------------------------
    def _repo(self, repo_type: str, repo_id: str) -> _Repo:
        repo = self._repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, "RepoNotFound", f"Repository {repo_id} not found")
        return repo

    def _tree(self, repo: _Repo, rev: str) -> tuple[str, dict[str, _Blob]]:
        sha = repo.refs.get(rev, rev if rev in repo.commits else None)
        if sha is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return sha, repo.commits[sha]

    def _commit(self, repo: _Repo, branch: str, files: dict[str, _Blob]) -> str:
        sha = hashlib.sha1(uuid.uuid4().bytes).hexdigest()
        repo.commits[sha] = files
        repo.refs[branch] = sha
        return sha

    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        return f"{self.url}/{PREFIX[repo_type]}{repo_id}"

    # ---- endpoints (each returns (status, json body) or raises HubError) -----------------------------------------
    def create_repo(self, body: dict, **_):
        repo_type = body.get("type") or "model"
        repo_id = f"{body.get('organization') or USER}/{body['name']}"
        url = self._repo_url(repo_type, repo_id)
        with self._lock:
            if (repo_type, repo_id) in self._repos:  # the client needs "url" in the 409 body for exist_ok=True
                return 409, {"error": "You already created this repo", "url": url}
            repo = self._repos[(repo_type, repo_id)] = _Repo(repo_type)
            self._commit(repo, "main", {".gitattributes": _Blob(GITATTRIBUTES, False)})
        return 200, {"url": url, "name": repo_id, "id": repo_id}

    def validate_yaml(self, **_):
        return 200, {"errors": [], "warnings": []}

    def agent_harnesses(self, **_):  # huggingface_hub calls .get() on it: an empty *dict* registry, not []
        return 200, {"standardEnvVars": [], "harnesses": {}}

    def info(self, kind, repo_id, rev=None, **_):
        repo_type = kind[:-1]
        sha, files = self._tree(self._repo(repo_type, repo_id), unquote(rev or "main"))
        siblings = [
            {
                "rfilename": p,
                "size": len(b.data),
                "blobId": b.oid,
                **({"lfs": {"sha256": b.sha256, "size": len(b.data), "pointerSize": len(b.pointer)}} if b.lfs else {}),
            }
            for p, b in sorted(files.items())
        ]
        return 200, {
            "id": repo_id,
            "modelId": repo_id,
            "sha": sha,
            "private": False,
            "disabled": False,
            "gated": False,
            "tags": [],
            "downloads": 0,
            "likes": 0,
            "siblings": siblings,
        }

    def tree(self, kind, repo_id, rev, path=None, query=None, **_):
        _, files = self._tree(self._repo(kind[:-1], repo_id), unquote(rev))
        base = unquote(path or "").strip("/")
        recursive = (query or {}).get("recursive", ["false"])[0].lower() in ("1", "true")
        if base and base not in files and not any(p.startswith(base + "/") for p in files):
            raise HubError(404, "EntryNotFound", f"{base} does not exist on {rev}")
        entries: dict[str, dict] = {}
        for p, b in sorted(files.items()):
            if base and not p.startswith(base + "/"):
                continue
            parts = p[len(base) + 1 if base else 0 :].split("/")
            depth = len(parts) if recursive else 1
            for i in range(1, min(depth, len(parts) - 1) + 1):  # folders above the file
                d = "/".join(filter(None, [base, *parts[:i]]))
                entries.setdefault(d, {"type": "directory", "path": d, "size": 0, "oid": _git_oid(d.encode())})
            if len(parts) <= depth:
                entries[p] = {
                    "type": "file",
                    "path": p,
                    "size": len(b.data),
                    "oid": b.oid,
                    **({"lfs": {"oid": b.sha256, "size": len(b.data), "pointerSize": len(b.pointer)}} if b.lfs else {}),
                }
        return 200, list(entries.values())

    def preupload(self, kind, repo_id, rev, body, **_):
        _, files = self._tree(self._repo(kind[:-1], repo_id), unquote(rev))
        out = []
        for f in body.get("files", []):
            lfs = f["path"].endswith(LFS_SUFFIXES) or f["size"] > LFS_THRESHOLD
            old = files.get(f["path"])
            oid = None if old is None or old.lfs != lfs else (old.sha256 if lfs else _git_oid(old.data))
            out.append(
                {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        return 200, {"files": out, "commitOid": None}

    def commit(self, kind, repo_id, rev, raw, query=None, **_):
        repo_type, branch = kind[:-1], unquote(rev)
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        create_pr = (query or {}).get("create_pr", ["0"])[0].lower() in ("1", "true")
        pr_url = None
        with self._lock:
            repo = self._repo(repo_type, repo_id)
            head, files = self._tree(repo, branch)
            if create_pr:  # a pull request is the ref refs/pr/N, starting at the base branch's head
                number = 1 + sum(ref.startswith("refs/pr/") for ref in repo.refs)
                branch = f"refs/pr/{number}"
                repo.refs[branch] = head
                pr_url = f"{self._repo_url(repo_type, repo_id)}/discussions/{number}"
            files = dict(files)
            for line in lines:
                key, value = line["key"], line["value"]
                if key == "header":
                    if value.get("parentCommit") not in (None, head):
                        raise HubError(412, None, f"parentCommit {value['parentCommit']} is not the head of {branch}")
                elif key == "file":
                    files[value["path"]] = _Blob(base64.b64decode(value["content"]), False)
                elif key == "lfsFile":
                    if value["oid"] not in self._lfs:
                        raise HubError(422, None, f"LFS object {value['oid']} for {value['path']} was never uploaded")
                    files[value["path"]] = _Blob(self._lfs[value["oid"]], True)
                elif key == "deletedFile":
                    if files.pop(value["path"], None) is None:
                        raise HubError(404, "EntryNotFound", f"A file with this name doesn't exist: {value['path']}")
                elif key == "deletedFolder":
                    folder = value["path"].rstrip("/") + "/"
                    files = {p: b for p, b in files.items() if not p.startswith(folder)}
                else:
                    raise HubError(400, None, f"unsupported commit operation {key!r}")
            sha = self._commit(repo, branch, files)
        return 200, {
            "commitUrl": f"{self._repo_url(repo_type, repo_id)}/commit/{sha}",
            "commitOid": sha,
            "pullRequestUrl": pr_url,
            "success": True,
        }

    def branch(self, kind, repo_id, rev, body, **_):
        with self._lock:
            repo, name = self._repo(kind[:-1], repo_id), unquote(rev)
            if name in repo.refs:
                raise HubError(409, None, f"Branch {name} already exists")
            repo.refs[name] = self._tree(repo, (body or {}).get("startingPoint") or "main")[0]
        return 200, {}

    def lfs_batch(self, prefix, repo_id, body, **_):
        self._repo((prefix or "models")[:-1], repo_id)
        objects = []
        for obj in body.get("objects", []):
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self._lfs:  # no "actions" = already stored, the client skips the upload
                entry["actions"] = {"upload": {"href": f"{self.url}/_lfs/{obj['oid']}", "expires_in": 3600}}
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}

    def lfs_put(self, oid, raw, **_):
        if hashlib.sha256(raw).hexdigest() != oid:
            raise HubError(400, None, "LFS content does not match its oid")
        self._lfs[oid] = raw
        return 200, {}

    def resolve(self, prefix, repo_id, rev, path, **_):
        """Returns (commit sha, blob); the handler turns it into a HEAD / GET / Range response."""
        sha, files = self._tree(self._repo((prefix or "models")[:-1], repo_id), unquote(rev))
        blob = files.get(unquote(path))
        if blob is None:  # transformers needs exactly this (not 401) to treat the file as optional
            raise HubError(404, "EntryNotFound", f"Entry not found: {path}")
        return sha, blob


class _Handler(BaseHTTPRequestHandler):
    hub: LoopbackHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while (size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)) > 0:
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers
                pass
            raw = b"".join(chunks)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw

    def _dispatch(self) -> None:
        method = self.command
        raw = self._read_body() if method in ("POST", "PUT") else b""  # always drain the body (keep-alive)
        parts = urlsplit(self.path)
        self.hub.requests.append((method, parts.path))
        name, m = None, None
        for route_method, pattern, route_name in ROUTES:
            m = re.fullmatch(pattern, parts.path)
            if m and (route_method == method or (route_method == "GET" and method == "HEAD")):
                name = route_name
                break
        try:
            if (fault := self.hub._injected_fault(method, parts.path)) is not None:
                raise HubError(fault.status, None, f"injected fault: {method} {parts.path} answered {fault.status}")
            if name is None:
                raise HubError(404, None, f"no route for {method} {parts.path}")
            is_json = "json" in self.headers.get("Content-Type", "") and "ndjson" not in self.headers["Content-Type"]
            body = json.loads(raw) if raw and is_json else {}  # LFS batch uses application/vnd.git-lfs+json
            result = getattr(self.hub, name)(*m.groups(), body=body, raw=raw, query=parse_qs(parts.query))
            if name == "resolve":
                self._send_file(method, *result)
            else:
                self._send(result[0], json.dumps(result[1]).encode())
        except Exception as exc:  # a bug or a malformed request: 400, since clients retry 5xx for ~20 s
            e = exc if isinstance(exc, HubError) else HubError(400, None, f"loopback hub failed: {exc!r}")
            if not isinstance(exc, HubError):
                traceback.print_exc()
            safe = e.message.encode("ascii", "backslashreplace").decode().replace("\n", " ")  # latin-1 headers
            headers = {"X-Error-Message": safe, **({"X-Error-Code": e.code} if e.code else {})}
            if e.code == "EntryNotFound" and name == "resolve":
                with contextlib.suppress(HubError):  # lets the client cache the miss per commit
                    headers["X-Repo-Commit"] = self.hub._tree(
                        self.hub._repo((m.group(1) or "models")[:-1], m.group(2)), unquote(m.group(3))
                    )[0]
            self._send(e.status, json.dumps({"error": e.message}).encode(), headers, head=method == "HEAD")

    do_GET = do_HEAD = do_POST = do_PUT = _dispatch

    def _send(
        self,
        status: int,
        payload: bytes,
        headers: dict | None = None,
        head: bool = False,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(payload)

    def _send_file(self, method: str, sha: str, blob: _Blob) -> None:
        headers = {"X-Repo-Commit": sha, "ETag": f'"{blob.oid}"', "Accept-Ranges": "bytes"}
        if blob.lfs:  # never X-Xet-Hash: the client must take the plain HTTP path
            headers.update({"X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": str(len(blob.data))})
        data, status, total = blob.data, 200, len(blob.data)
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if m and method == "GET" and (m.group(1) or m.group(2)):
            start, end = m.groups()
            start, end = (int(start), int(end or total - 1)) if start else (max(total - int(end), 0), total - 1)
            if start >= total and total > 0:
                return self._send(416, b"", {"Content-Range": f"bytes */{total}", **headers})
            data, status = data[start : min(end, total - 1) + 1], 206
            headers["Content-Range"] = f"bytes {start}-{start + len(data) - 1}/{total}"
        self._send(status, data, headers, head=method == "HEAD", content_type="application/octet-stream")


@contextlib.contextmanager
def use_loopback_hub(
    hub: LoopbackHub, cache_dir: str | os.PathLike | None = None, token: str = FAKE_TOKEN
) -> Iterator[str]:
    """Point the already-imported huggingface_hub / transformers / datasets at `hub` (online, fake token), restore on exit.

    Downloads go to `cache_dir` (default: a temporary directory removed on exit), never to the user's HF cache.
    Yields the cache directory in use. Environment variables are set too, so subprocesses started inside inherit
    them (see also `LoopbackHub.env`).
    """
    from huggingface_hub import constants, hf_api

    tmp = tempfile.mkdtemp(prefix="loopback-hub-") if cache_dir is None else None
    cache_dir = str(cache_dir if cache_dir is not None else tmp)
    patches = [  # (object, attribute, value): module-level copies the clients read at call time
        (constants, "ENDPOINT", hub.url),
        (constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}"),
        (constants, "HF_URL_HOSTS", constants.HF_URL_HOSTS | {hub.host}),
        (constants, "HF_HUB_OFFLINE", False),
        (constants, "HF_HUB_DISABLE_XET", True),
        (constants, "HF_HUB_CACHE", cache_dir),
        (constants, "AGENT_HARNESSES_PATH", os.path.join(cache_dir, ".agent_harnesses.json")),
        (hf_api.api, "endpoint", hub.url),  # module-level HfApi behind create_repo/upload_folder/upload_file
    ]
    # `datasets` keeps its own copies (read at its import): without them load_dataset("org/name") asks huggingface.co.
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:
        patches += [
            (datasets_config, "HF_ENDPOINT", hub.url),
            (datasets_config, "HF_HUB_OFFLINE", False),
            (datasets_config, "HF_DATASETS_OFFLINE", False),
            (datasets_config, "HF_DATASETS_CACHE", Path(cache_dir) / "datasets"),
        ]
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
    env_saved = {k: os.environ.get(k) for k in hub.env(cache_dir)}
    # transformers keeps a lazily built HfApi (with the endpoint of its creation time) in `_hf_api`
    tf_hub = sys.modules.get("transformers.utils.hub")
    tf_saved = getattr(tf_hub, "_hf_api", None)
    try:
        for obj, attr, value in patches:
            setattr(obj, attr, value)
        os.environ.update({**hub.env(cache_dir), "HF_TOKEN": token})
        if tf_hub is not None:
            tf_hub._hf_api = None
        yield cache_dir
    finally:
        for obj, attr, value in saved:
            setattr(obj, attr, value)
        for k, v in env_saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if (tf_hub := sys.modules.get("transformers.utils.hub")) is not None:
            tf_hub._hf_api = tf_saved
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a loopback Hugging Face Hub until Ctrl-C.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    args = parser.parse_args(argv)
    hub = LoopbackHub(args.host, args.port).start()
    print(f"LOOPBACK_HUB_URL={hub.url}", flush=True)
    print(
        f"# clients: export HF_ENDPOINT={hub.url} HF_HUB_DISABLE_XET=1 HF_HUB_OFFLINE=0 HF_TOKEN={FAKE_TOKEN}",
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `Popen.terminate()` stops it cleanly too
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()


if __name__ == "__main__":
    main()
