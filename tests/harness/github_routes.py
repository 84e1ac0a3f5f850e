"""The GitHub fake's endpoints: one method per REST operation, found through ``ROUTES``.

``FakeGitHub`` (``github_server``) inherits these; each takes a ``Call`` and answers
``(status, body, headers)`` or raises ``ApiError`` with GitHub's error shape.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
from typing import Any
from urllib.parse import unquote

from tests.harness import github_openapi as api
from tests.harness.github_openapi import ApiError, Shapes, blob_sha, now
from tests.harness.github_state import Answer, Call, Commit, Repo, open_issue, resolve


class Routes:
    """Endpoint handlers over the state ``FakeGitHub`` keeps."""

    login: str
    url: str
    repos: dict[str, Repo]
    commits: list[Commit]
    _shapes: Shapes
    _ids: itertools.count[int]

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        for verb, pattern, route in ROUTES:
            match = pattern.match(path)
            if verb == method and match:
                args = {k: unquote(v) for k, v in match.groupdict().items()}
                repo = self.repos.get(f"{args.pop('owner', '')}/{args.pop('repo', '')}".lower())
                if repo is None and pattern.pattern.startswith(_REPO):
                    raise ApiError(404, "Not Found")
                # ``repo`` is None only for /user and /rate_limit, whose routes never read it.
                return getattr(self, route)(Call(repo, args, query, body))  # type: ignore[arg-type]
        raise ApiError(404, "Not Found")

    def _commit_sha(self) -> str:
        return hashlib.sha1(f"commit {next(self._ids)}".encode()).hexdigest()

    # -- bodies from state -----------------------------------------------------------------

    def _repo_json(self, repo: Repo) -> dict[str, Any]:
        return self._shapes.repository(repo.full_name, repo.default_branch, len(repo.issues))

    def _pull_json(self, repo: Repo, number: int) -> dict[str, Any]:
        issue = repo.issues[number]
        # A test's pull request may name its commits directly (they live in a local git
        # repository, not in the fake's own history).
        shas = {
            side: issue["pull"].get(f"{side}_sha") or resolve(repo, issue["pull"][side])
            for side in ("head", "base")
        }
        repo_json = self._repo_json(repo)
        data = self._shapes.pull(repo.full_name, number, issue, shas, repo_json, self.login)
        data["labels"] = [self._label_json(repo, name) for name in issue.get("labels", [])]
        return data

    def _comment_json(self, repo: Repo, comment_id: int) -> dict[str, Any]:
        comment = repo.comments[comment_id]
        on_pull = repo.issues[comment["issue"]]["pull"] is not None
        # A test may set "user" to stand for a comment written by another account.
        author = comment.get("user", self.login)
        return self._shapes.comment(repo.full_name, comment_id, comment, on_pull, author)

    # -- routes, named in ROUTES -----------------------------------------------------------

    def _get_repo(self, c: Call) -> Answer:
        return 200, self._repo_json(c.repo), {}

    def _get_issue(self, c: Call) -> Answer:
        n = c.issue()
        count = sum(comment["issue"] == n for comment in c.repo.comments.values())
        return 200, self._shapes.issue(c.name, n, c.repo.issues[n], count, self.login), {}

    def _list_comments(self, c: Call) -> Answer:
        """One page of comments, with the RFC 5988 ``Link`` header PyGithub paginates by."""
        n = c.issue()
        ids = [i for i, x in sorted(c.repo.comments.items()) if x["issue"] == n]
        here = f"{self.url}/repos/{c.name}/issues/{n}/comments"
        ids, links = self._shapes.paginate(ids, c.query, here)
        return 200, [self._comment_json(c.repo, i) for i in ids], links

    def _create_comment(self, c: Call) -> Answer:
        n = c.issue()
        if not isinstance(c.body.get("body"), str):
            raise ApiError(422, "Validation Failed")
        comment_id, stamp = next(self._ids), now()
        comment = {"issue": n, "body": c.body["body"], "created_at": stamp, "updated_at": stamp}
        c.repo.comments[comment_id] = comment
        data = self._comment_json(c.repo, comment_id)
        return 201, data, {"Location": data["url"]}

    def _get_comment(self, c: Call) -> Answer:
        return 200, self._comment_json(c.repo, c.comment()), {}

    def _edit_comment(self, c: Call) -> Answer:
        c.repo.comments[c.comment()].update(body=c.body.get("body", ""), updated_at=now())
        return 200, self._comment_json(c.repo, c.comment()), {}

    def _delete_comment(self, c: Call) -> Answer:
        del c.repo.comments[c.comment()]
        return 204, None, {}

    def _remove_label(self, c: Call) -> Answer:
        """DELETE .../labels/{name}: 200 with the labels left, 404 if it was not there."""
        labels = c.repo.issues[c.issue()].setdefault("labels", [])
        name = c.args["name"]
        if name not in labels:
            raise ApiError(404, "Label does not exist")
        labels.remove(name)
        return 200, [self._label_json(c.repo, label) for label in labels], {}

    def _label_json(self, repo: Repo, name: str) -> dict[str, Any]:
        number = sum(ord(ch) for ch in name)
        return {
            "id": number,
            "node_id": f"LA_{number}",
            "url": f"{self.url}/repos/{repo.full_name}/labels/{name}",
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
        }

    def _get_pull(self, c: Call) -> Answer:
        return 200, self._pull_json(c.repo, c.issue(pull=True)), {}

    def _list_pulls(self, c: Call) -> Answer:
        """Open pull requests (all the fake has), filtered by ``head`` (owner:branch), ``base``."""
        head, base = c.param("head", ""), c.param("base", "")
        owner = c.name.split("/")[0]
        numbers = [
            n
            for n, i in sorted(c.repo.issues.items())
            if i["pull"]
            and (not head or head == f"{owner}:{i['pull']['head']}")
            and (not base or base == i["pull"]["base"])
            and c.param("state", "open") in ("open", "all")
        ]
        here = f"{self.url}/repos/{c.name}/pulls"
        numbers, links = self._shapes.paginate(numbers, c.query, here)
        return 200, [self._pull_json(c.repo, n) for n in numbers], links

    def _create_pull(self, c: Call) -> Answer:
        head, base = c.body.get("head", "").split(":")[-1], c.body.get("base", "")
        for side, ref in (("head", head), ("base", base)):
            if f"refs/heads/{ref}" not in c.repo.refs:
                error = {"resource": "PullRequest", "field": side, "code": "invalid"}
                raise ApiError(422, "Validation Failed", errors=[error])
        pulls = [
            (i["pull"]["head"], i["pull"]["base"]) for i in c.repo.issues.values() if i["pull"]
        ]
        if (head, base) in pulls:
            message = f"A pull request already exists for {c.name.split('/')[0]}:{head}."
            error = {"resource": "PullRequest", "code": "custom", "message": message}
            raise ApiError(422, "Validation Failed", errors=[error])
        number = open_issue(c.repo, c.body.get("title", ""), c.body.get("body") or "")
        draft = bool(c.body.get("draft"))
        c.repo.issues[number]["pull"] = {"head": head, "base": base, "draft": draft}
        data = self._pull_json(c.repo, number)
        return 201, data, {"Location": data["url"]}

    def _get_contents(self, c: Call) -> Answer:
        """A file with its content, or a folder's listing (files and sub-folders)."""
        ref, path = c.param("ref", c.repo.default_branch), c.args["path"].strip("/")
        tree = c.repo.commits[resolve(c.repo, ref)].tree
        if path in tree:
            return 200, self._shapes.file(c.name, path, blob_sha(tree[path]), tree[path], ref), {}
        prefix = path + "/"
        children = sorted(
            {prefix + p[len(prefix) :].split("/")[0] for p in tree if p.startswith(prefix)}
        )
        if not children:
            raise ApiError(404, "Not Found")
        listing = [
            self._shapes.content(c.name, p, blob_sha(tree[p]), len(tree[p]), ref)
            if p in tree  # else a sub-folder, with a made-up tree sha
            else self._shapes.content(c.name, p, blob_sha(p.encode()), 0, ref, kind="dir")
            for p in children
        ]
        return 200, listing, {}

    def _put_contents(self, c: Call) -> Answer:
        """Create (201) or update (200) one file, as a new commit on ``branch``."""
        branch, path = c.body.get("branch") or c.repo.default_branch, c.args["path"]
        if f"refs/heads/{branch}" not in c.repo.refs:
            raise ApiError(404, f"Branch {branch} not found")
        try:
            data = base64.b64decode(c.body.get("content", ""), validate=True)
        except ValueError as error:
            raise ApiError(422, "content is not valid Base64") from error
        head = c.repo.commits[c.repo.refs[f"refs/heads/{branch}"]]
        current = head.tree.get(path)
        if current is not None and "sha" not in c.body:
            raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
        # A sha naming a file that has since changed, or gone, is stale: GitHub answers 409.
        if "sha" in c.body and (current is None or blob_sha(current) != c.body["sha"]):
            raise ApiError(409, f"{path} does not match {c.body['sha']}")
        tree, message = {**head.tree, path: data}, c.body.get("message", "")
        commit = Commit(self._commit_sha(), c.name, branch, message, tree, head.sha)
        c.repo.commits[commit.sha] = commit
        c.repo.refs[f"refs/heads/{branch}"] = commit.sha
        self.commits.append(commit)
        content = self._shapes.content(c.name, path, blob_sha(data), len(data), branch)
        answer = self._shapes.file_commit(c.name, content, commit.sha, head.sha, message)
        return (201 if current is None else 200), answer, {}

    def _get_ref(self, c: Call) -> Answer:
        ref = f"refs/{c.args['ref']}"
        if ref not in c.repo.refs:
            raise ApiError(404, "Not Found")
        return 200, self._shapes.ref(c.name, ref, c.repo.refs[ref]), {}

    def _create_ref(self, c: Call) -> Answer:
        ref, sha = c.body.get("ref", ""), c.body.get("sha", "")
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise ApiError(422, f"{ref} is not a valid ref name.")
        if ref in c.repo.refs:
            raise ApiError(422, "Reference already exists")
        if sha not in c.repo.commits:
            raise ApiError(422, "Object does not exist")
        c.repo.refs[ref] = sha
        data = self._shapes.ref(c.name, ref, sha)
        return 201, data, {"Location": data["url"]}

    def _permission(self, c: Call) -> Answer:
        """A collaborator's role and legacy permission, as GitHub maps them (maintain reads
        as write, triage as read); GitHub answers 404 for an account that is none."""
        login = c.args["username"]
        found = c.repo.permissions.get(login.lower())
        if found is None:
            raise ApiError(404, f"{login} is not a user")
        role, legacy = found
        permission = legacy or {"maintain": "write", "triage": "read"}.get(role, role)
        data = api.example(
            "repository-collaborator-permission-response-if-user-has-admin-permissions"
        )
        data = json.loads(json.dumps(data).replace('"octocat"', json.dumps(login)))
        data.update(permission=permission, role_name=role)
        data["user"]["role_name"] = role  # required by the schema; the example lacks it
        return 200, self._shapes.localize(data), {}

    def _get_user(self, c: Call) -> Answer:
        return 200, self._shapes.private_user(self.login), {}

    def _rate_limit(self, c: Call) -> Answer:
        return 200, self._shapes.localize(api.example("rate-limit-overview")), {}


_REPO = r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_ISSUE, _COMMENT = r"/issues/(?P<number>\d+)", r"/issues/comments/(?P<comment_id>\d+)"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (verb, re.compile(pattern + "$"), route)
    for verb, pattern, route in [
        ("GET", _REPO, "_get_repo"),
        ("GET", _REPO + _ISSUE, "_get_issue"),
        ("GET", _REPO + _ISSUE + "/comments", "_list_comments"),
        ("POST", _REPO + _ISSUE + "/comments", "_create_comment"),
        ("GET", _REPO + _COMMENT, "_get_comment"),
        ("PATCH", _REPO + _COMMENT, "_edit_comment"),
        ("DELETE", _REPO + _COMMENT, "_delete_comment"),
        ("DELETE", _REPO + _ISSUE + "/labels/(?P<name>[^/]+)", "_remove_label"),
        ("GET", _REPO + r"/pulls/(?P<number>\d+)", "_get_pull"),
        ("GET", _REPO + "/pulls", "_list_pulls"),
        ("POST", _REPO + "/pulls", "_create_pull"),
        ("GET", _REPO + "/contents/(?P<path>.+)", "_get_contents"),
        ("PUT", _REPO + "/contents/(?P<path>.+)", "_put_contents"),
        ("GET", _REPO + "/git/ref/(?P<ref>.+)", "_get_ref"),
        ("POST", _REPO + "/git/refs", "_create_ref"),
        ("GET", _REPO + "/collaborators/(?P<username>[^/]+)/permission", "_permission"),
        ("GET", "^/user", "_get_user"),
        ("GET", "^/rate_limit", "_rate_limit"),
    ]
]
