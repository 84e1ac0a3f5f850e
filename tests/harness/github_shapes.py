"""GitHub's REST responses as ``tests/harness/github_server.py`` sends them.

Bodies start from the examples in GitHub's OpenAPI description (``github_spec``), so they
cannot drift from what GitHub sends; errors, ids, timestamps and rate-limit headers follow
GitHub's conventions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import zlib
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from tests.harness.github_spec import example


def error_body(status: int, message: str, **extra: Any) -> dict[str, Any]:
    """GitHub's JSON error shape (``basic-error`` / ``validation-error``)."""
    docs = "https://docs.github.com/rest"
    return {"message": message, "documentation_url": docs, "status": str(status), **extra}


class ApiError(Exception):
    """Raised while serving a request to answer with GitHub's JSON error shape."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = error_body(status, message, **extra)


def blob_sha(data: bytes) -> str:
    """Git's blob id: GitHub reports it as a file's ``sha`` and requires it back on update."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def now() -> str:
    """A timestamp as GitHub writes them."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rate_headers(used: int) -> dict[str, str]:
    """Sent with every answer; PyGithub reads them into ``Github.rate_limiting``."""
    return {
        "X-RateLimit-Limit": "5000",
        "X-RateLimit-Remaining": str(max(0, 5000 - used)),
        "X-RateLimit-Used": str(used),
        "X-RateLimit-Reset": str(int(time.time()) + 3600),
        "X-RateLimit-Resource": "core",
    }


def _id(*parts: object) -> int:
    """A stable numeric id; GitHub's ids are opaque integers."""
    return zlib.crc32("/".join(map(str, parts)).encode()) % 10**8 + 1


def _node(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Shapes:
    """Response bodies as GitHub sends them, pointing at ``base`` (the fake's own address).

    Each starts from the description's example of that response, so fields no test thinks of
    are still present and typed as GitHub types them; only identity and state are replaced.
    URLs are rewritten because PyGithub refuses to follow URLs on another host.
    """

    def __init__(self, base: str) -> None:
        self.base = base

    def localize(self, payload: Any, full_name: str | None = None) -> Any:
        """``payload`` with GitHub's hosts replaced by ``base``, its sample repo by ours."""
        text = json.dumps(payload)
        if full_name is not None:
            text = re.sub(r"octocat/Hello-World(?![-\w])", full_name, text)
        return json.loads(re.sub(r"https://([\w-]+\.)*github(usercontent)?\.com", self.base, text))

    def account(self, login: str) -> dict[str, Any]:
        """A ``simple-user``."""
        user = json.loads(json.dumps(example("issue-comment")["user"]).replace("octocat", login))
        user.update(id=_id(login), node_id=_node(f"U_{login}"))
        return self.localize(user)

    def private_user(self, login: str) -> dict[str, Any]:
        """The authenticated user (``GET /user``), tagged for the spec's discriminator."""
        user = json.loads(json.dumps(example("private-user")).replace("octocat", login))
        user.update(id=_id(login), user_view_type="private")
        return self.localize(user)

    def repository(self, full_name: str, default_branch: str, open_issues: int) -> dict[str, Any]:
        """A ``full-repository``: what ``Github.get_repo`` reads, ``url`` included."""
        data = example("full-repository")
        for key in ("template_repository", "parent", "source", "organization"):
            data.pop(key)  # forks, templates and organisations are out of scope
        data = self.localize(data, full_name)
        owner, name = full_name.split("/")
        data.update(id=_id(full_name), node_id=_node(f"R_{full_name}"), name=name)
        data.update(full_name=full_name, owner=self.account(owner), license=None, topics=[])
        data.update(default_branch=default_branch, has_discussions=False)
        data.update(open_issues=open_issues, open_issues_count=open_issues)
        return data

    def _numbered(
        self, name: str, full_name: str, number: int, title: str, body: str
    ) -> dict[str, Any]:
        """Fields issues and pull requests share; the example's number 1347 becomes ours."""
        data = self.localize(example(name), full_name)
        data = json.loads(re.sub(r"/1347\b", f"/{number}", json.dumps(data)))
        data.update(id=_id(full_name, number), node_id=_node(f"I_{full_name}#{number}"))
        data.update(number=number, title=title, body=body, state="open", locked=False)
        data.update(labels=[], assignee=None, assignees=[], milestone=None, closed_at=None)
        data.update(active_lock_reason=None, author_association="OWNER")
        return data

    def issue(
        self, full_name: str, number: int, issue: dict[str, Any], comments: int, login: str
    ) -> dict[str, Any]:
        """An ``issue``; ``issue`` holds title, body, created_at and pull (or None)."""
        data = self._numbered("issue", full_name, number, issue["title"], issue["body"])
        data.update(user=self.account(login), comments=comments, closed_by=None)
        data.update(state_reason=None, created_at=issue["created_at"])
        data.update(updated_at=issue["created_at"])
        if issue["pull"] is None:
            del data["pull_request"]
        return data

    def pull(
        self,
        full_name: str,
        number: int,
        issue: dict[str, Any],
        shas: dict[str, str],
        repository: dict[str, Any],
        login: str,
    ) -> dict[str, Any]:
        """A ``pull-request``; ``shas`` maps "head" and "base" to their tip commits."""
        data = self._numbered("pull-request", full_name, number, issue["title"], issue["body"])
        owner = full_name.split("/")[0]
        for side in ("head", "base"):
            ref = issue["pull"][side]
            data[side].update(ref=ref, sha=shas[side], label=f"{owner}:{ref}", repo=repository)
            data[side]["user"] = self.account(owner)
        data.update(user=self.account(login), requested_teams=[], requested_reviewers=[])
        data.update(merged=False, merged_at=None, merged_by=None, mergeable=None)
        data.update(draft=issue["pull"]["draft"], mergeable_state="unknown")
        data.update(created_at=issue["created_at"], updated_at=issue["created_at"])
        return data

    def comment(
        self, full_name: str, comment_id: int, comment: dict[str, Any], on_pull: bool, login: str
    ) -> dict[str, Any]:
        """An ``issue-comment``; ``comment`` holds issue, body, created_at, updated_at."""
        data = self.localize(example("issue-comment"), full_name)
        api = f"{self.base}/repos/{full_name}/issues"
        page = f"{self.base}/{full_name}/{'pull' if on_pull else 'issues'}/{comment['issue']}"
        data.update(id=comment_id, node_id=_node(f"IC_{comment_id}"), body=comment["body"])
        data.update(url=f"{api}/comments/{comment_id}", issue_url=f"{api}/{comment['issue']}")
        data.update(html_url=f"{page}#issuecomment-{comment_id}", user=self.account(login))
        data.update(created_at=comment["created_at"], updated_at=comment["updated_at"])
        data.update(author_association="OWNER")
        return data

    def content(
        self, full_name: str, path: str, sha: str, size: int, ref: str, kind: str = "file"
    ) -> dict[str, Any]:
        """A ``content-file`` without its content: a directory entry or a PUT's ``content``."""
        api = f"{self.base}/repos/{full_name}"
        self_url = f"{api}/contents/{quote(path)}?ref={quote(ref)}"
        git_url = f"{api}/git/{'blobs' if kind == 'file' else 'trees'}/{sha}"
        html = f"{self.base}/{full_name}/{'blob' if kind == 'file' else 'tree'}/{ref}/{path}"
        raw = f"{self.base}/raw/{full_name}/{ref}/{quote(path)}" if kind == "file" else None
        return {
            "type": kind,
            "size": size,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "url": self_url,
            "git_url": git_url,
            "html_url": html,
            "download_url": raw,
            "_links": {"self": self_url, "git": git_url, "html": html},
        }

    def file(self, full_name: str, path: str, sha: str, data: bytes, ref: str) -> dict[str, Any]:
        """A ``content-file`` with its base64 content, wrapped at 60 columns like GitHub's."""
        b64 = base64.b64encode(data).decode()
        wrapped = "".join(b64[i : i + 60] + "\n" for i in range(0, len(b64), 60))
        body = self.content(full_name, path, sha, len(data), ref)
        return {**body, "content": wrapped, "encoding": "base64"}

    def file_commit(
        self, full_name: str, content: dict[str, Any], sha: str, parent: str, message: str
    ) -> dict[str, Any]:
        """A ``file-commit``: what PUT contents answers."""
        commit = self.localize(example("file-commit-example-for-creating-a-file"), full_name)
        commit = commit["commit"]
        api = f"{self.base}/repos/{full_name}/git/commits"
        html = f"{self.base}/{full_name}/commit"
        commit.update(sha=sha, node_id=_node(f"C_{sha}"), message=message)
        commit.update(url=f"{api}/{sha}", html_url=f"{html}/{sha}")
        commit["parents"] = [
            {"sha": parent, "url": f"{api}/{parent}", "html_url": f"{html}/{parent}"}
        ]
        return {"content": content, "commit": commit}

    def paginate(
        self, items: list[Any], query: dict[str, list[str]], here: str
    ) -> tuple[list[Any], dict[str, str]]:
        """One page of ``items`` per ``page``/``per_page``, and its RFC 5988 ``Link`` header."""
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(items) // per_page))
        kept = {k: v[0] for k, v in query.items() if k not in ("page", "per_page")}

        def link(to: int, rel: str) -> str:
            return f'<{here}?{urlencode({**kept, "per_page": per_page, "page": to})}>; rel="{rel}"'

        rels = [link(page + 1, "next"), link(last, "last")] if page < last else []
        rels += [link(page - 1, "prev"), link(1, "first")] if page > 1 else []
        chunk = items[(page - 1) * per_page : page * per_page]
        return chunk, {"Link": ", ".join(rels)} if rels else {}

    def ref(self, full_name: str, ref: str, sha: str) -> dict[str, Any]:
        """A ``git-ref`` pointing at commit ``sha``."""
        api = f"{self.base}/repos/{full_name}/git"
        target = {"type": "commit", "sha": sha, "url": f"{api}/commits/{sha}"}
        return {"ref": ref, "node_id": _node(f"REF_{ref}"), "url": f"{api}/{ref}", "object": target}
