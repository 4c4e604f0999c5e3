"""T14: what the REST API answers is a person's data (an approval's exact arguments, the audit trail, their tokens),
and no browser or proxy cache may keep it, as none keeps an admin page (``admin_view``: ``Cache-Control: no-store``)."""

from tests.api.conftest import api_db, http, make_token, session_cookies

pytestmark = api_db


def _not_kept(response) -> None:
    directives = {part.strip() for part in response.headers.get("Cache-Control", "").split(",")}
    assert {"no-store", "private"} <= directives, (response.request.url, response.headers.get("Cache-Control"))
    assert not any(part.startswith(("public", "max-age=", "s-maxage=")) and part != "max-age=0" for part in directives)


def test_no_answer_of_the_api_is_kept_by_a_browser_or_a_proxy(api, pending, approver, catalog, grant):
    """An approver reading a request in the browser (their admin session) or with a token: the answer holds the call's
    exact arguments. It was sent without any cache header, so a browser's disk cache kept it for whoever uses the
    computer next, and a proxy told to cache what it may could serve it on. A refused or unknown path too."""
    grant(approver, catalog.github, "approve")
    approver.is_staff = True  # a session comes from the admin's sign-in
    approver.save()
    token = make_token(approver, ["api", "approve"])
    cookies = session_cookies(approver)
    # Answered or refused (the approver's token may not list tools or servers), each is marked.
    for path in (f"approvals/{pending.approval_id}/", "approvals/", "audit/", "tokens/", "tools/", "servers/"):
        by_token = api.get(path, token=token)
        by_session = http("GET", f"{api.base}/api/v1/{path}", cookies=cookies)
        _not_kept(by_token)
        _not_kept(by_session)
    read = http("GET", f"{api.base}/api/v1/approvals/{pending.approval_id}/", cookies=cookies)
    assert read.status_code == 200 and read.json()["arguments"] == {"repo": "scout"}
    for refused in (api.get("approvals/"), api.get("no-such-route/", token=token)):
        assert refused.status_code in (401, 404)
        _not_kept(refused)
