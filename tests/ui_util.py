"""Helpers for the dashboard tests: a real runtime (SQLite + Chroma in a temp folder, the
hash embedder) with its dashboard mounted in front of a stand-in for the MCP app, driven by
Starlette's TestClient; signing in with a one-time link or a token; reading CSRF tokens."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient

from server.http.auth import TokenStore, make_authenticator
from server.service.core.runtime import Runtime
from server.ui import Dashboard
from server.ui.logins import sign_login

SECRET = "local-secret-for-tests"
OWNER_ENV = {"PATTERN_EMBEDDER": "hash", "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "owner"}


async def not_mcp(scope, receive, send):
    """Stands in for the bearer-authenticated MCP app behind the dashboard."""
    await PlainTextResponse("mcp", status_code=401)(scope, receive, send)


class UiHarness:
    def __init__(self, home: Path, env: dict | None = None, cwd: Path | None = None) -> None:
        self.home = home
        full = {**OWNER_ENV, "PATTERN_HOME": str(home), **(env or {})}
        self.rt = Runtime.start(full, cwd or home, background=False)
        self.tokens = TokenStore(home)
        auth = make_authenticator(SECRET, self.tokens, self.rt.identity.project_id)
        self.dashboard = Dashboard(self.rt, secret=SECRET, authenticate=auth)
        self.app = self.dashboard.mount(not_mcp)
        self.clients: list[TestClient] = []

    @property
    def svc(self):
        return self.rt.service

    def client(self) -> TestClient:
        c = TestClient(self.app, follow_redirects=False)
        self.clients.append(c)
        return c

    def owner(self) -> TestClient:
        """A client signed in as the store owner through a one-time link."""
        c = self.client()
        r = c.get(f"/ui/login?t={sign_login(SECRET)}")
        assert r.status_code == 303, r.text
        return c

    def token_client(self, token: str, project: str | None = None) -> TestClient:
        c = self.client()
        page = c.get("/ui/login")
        r = c.post(
            "/ui/login",
            data={"token": token, "project": project or "", "csrf": hidden_csrf(page.text)},
        )
        assert r.status_code == 303, r.text
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.dashboard.close()
        self.rt.close()


def hidden_csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def csrf_of(client: TestClient) -> str:
    """The session's CSRF token, as the pages embed it."""
    return hidden_csrf(client.get("/ui/health").text)


# ---------------------------------------------------------------------- a realistic store
XSS = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'

DEMO_MEMORIES = [
    # (agent, scope, category, content, tags, priority)
    (
        "owner",
        "team",
        "decisions",
        "We deploy with blue/green on Tuesdays and Thursdays; Friday deploys need a second reviewer.",
        ["deploy"],
        1,
    ),
    (
        "owner",
        "team",
        "architecture",
        "The billing service owns invoices; orders only keep the invoice id.",
        ["billing"],
        2,
    ),
    (
        "owner",
        "team",
        "learnings",
        "pytest-xdist hides fixture teardown errors: run the flaky suite with -p no:xdist to see them.",
        ["testing"],
        2,
    ),
    (
        "alice",
        "team",
        "decisions",
        "Postgres 16 everywhere; staging is rebuilt from the nightly snapshot at 02:00 UTC.",
        ["database"],
        1,
    ),
    (
        "alice",
        "team",
        "learnings",
        "The payments sandbox rejects cards with a CVC of 000: use 123 in fixtures.",
        ["payments", "testing"],
        2,
    ),
    (
        "bob",
        "team",
        "architecture",
        "Search runs hybrid ranking: FTS5 bm25 fused with MiniLM cosine similarity.",
        ["search"],
        2,
    ),
    (
        "bob",
        "team",
        "learnings",
        "Chroma needs embeddings passed explicitly, or it tries to download a model.",
        ["vectors"],
        2,
    ),
    (
        "owner",
        "private",
        "longterm",
        "Ask Ada before touching the invoice numbering: auditors read those.",
        ["billing"],
        1,
    ),
    (
        "owner",
        "private",
        "longterm",
        "The release checklist lives in docs/release.md; step 4 is easy to forget.",
        ["deploy"],
        2,
    ),
    (
        "owner",
        "private",
        "tasks",
        "Rotate the staging API key after the demo on Monday.",
        ["ops"],
        1,
    ),
    (
        "owner",
        "private",
        "recent",
        "Flaky test test_invoice_rounding fails when TZ is not UTC.",
        ["testing"],
        2,
    ),
    (
        "owner",
        "private",
        "longterm",
        "Prefer uv for local installs: the wheelhouse cache makes CI 3x faster.",
        ["tooling"],
        3,
    ),
    ("owner", "personal", "core", "I review every schema migration myself before it ships.", [], 1),
    (
        "owner",
        "personal",
        "longterm",
        "I write commit messages with the measured numbers in them.",
        [],
        2,
    ),
    (
        "owner",
        "public",
        "learnings",
        "SQLite WAL mode lets readers run beside one writer without blocking.",
        ["sqlite"],
        2,
    ),
    (
        "carol",
        "public",
        "decisions",
        "All services log JSON lines with a request id.",
        ["logging"],
        2,
    ),
]
DEMO_ENTITIES = [
    (
        "billing-service",
        "service",
        ["charges cards nightly", "owns invoices and credit notes", "written in Go"],
    ),
    (
        "orders-service",
        "service",
        ["keeps the invoice id of each order", "publishes order.created"],
    ),
    ("postgres", "database", ["version 16", "staging rebuilt nightly from a snapshot"]),
    ("kafka", "queue", ["carries order.created and invoice.paid"]),
    ("Ada", "person", ["owns billing", "approves invoice-numbering changes"]),
    ("Linus", "person", ["on call this week", "maintains the deploy pipeline"]),
    ("deploy-pipeline", "tool", ["blue/green", "runs on Tuesdays and Thursdays"]),
    ("payments-sandbox", "service", ["rejects CVC 000"]),
]
DEMO_RELATIONS = [
    ("billing-service", "postgres", "stores_in"), ("orders-service", "postgres", "stores_in"),
    ("orders-service", "kafka", "publishes_to"), ("billing-service", "kafka", "consumes"),
    ("Ada", "billing-service", "maintains"), ("Linus", "deploy-pipeline", "maintains"),
    ("deploy-pipeline", "billing-service", "deploys"), ("deploy-pipeline", "orders-service", "deploys"),
    ("billing-service", "payments-sandbox", "tests_against"),
]  # fmt: skip
DEMO_SESSION = [
    ("user", "The invoice rounding test fails on my machine but not in CI. Why?"),
    (
        "assistant",
        "It formats dates in the local time zone. CI runs with TZ=UTC; your shell does not.",
    ),
    (
        "tool",
        "Bash(command=TZ=UTC pytest tests/test_invoice.py -k rounding) → ok: 1 passed in 0.41s",
    ),
    (
        "assistant",
        "Confirmed: with TZ=UTC it passes. The fix is to pass tz=UTC in format_due_date().",
    ),
    ("user", "Please make that change and remember it for the team."),
    (
        "assistant",
        "Done: format_due_date() now takes the invoice's time zone; I stored a team learning.",
    ),
]


def demo_lesson(name: str, message: str, rate: float, uses: int):
    from graph.lesson_models import LessonInput

    return LessonInput.model_validate({
        "name": name, "entityType": "lesson",
        "observations": ["pin the peer dependency in package.json", "delete node_modules first"],
        "errorPattern": {"type": "dependency", "message": message, "context": "npm install",
                         "stackTrace": None},
        "metadata": {"severity": "high", "environment": {"os": "linux", "node": "20"},
                     "frequency": uses, "successRate": rate},
        "verificationSteps": [
            {"command": "npm ci", "expectedOutput": "added 412 packages", "successIndicators": ["added"]},
            {"command": "npm test", "expectedOutput": "0 failing", "successIndicators": ["passing"]},
        ],
    })  # fmt: skip


def make_demo_folder(folder: Path) -> Path:
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "invoice.py").write_text(
        '"""Invoices."""\n\n\ndef format_due_date(d, tz):\n    return d.astimezone(tz).date().isoformat()\n'
    )
    (folder / "src" / "orders.py").write_text(
        "def place(order):\n    publish('order.created', order)\n"
    )
    (folder / "README.md").write_text(
        "# Shop\n\nOrders, invoices and payments.\n\n## Deploy\n\nBlue/green.\n"
    )
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "package-lock.json").write_text("{}\n")
    (folder / "big.log").write_text("x" * 700_000)
    return folder


def populate_demo(rt: Runtime, folder: Path, xss: bool = True) -> dict[str, str]:
    """A few dozen memories of several agents, a graph, lessons, an ingested folder, one
    session and one pending proposal: what the screenshots show; with ``xss``, also a memory
    and an observation whose text is markup that must never run."""
    import uuid
    from datetime import timedelta

    from graph.models import EntityInput, Relation
    from ingest.sessions import exchanges
    from retrieval.records import utcnow
    from server.service.browsing import review
    from server.service.core.identity import Identity
    from server.service.core.models import MemoryInput, MemoryMetadata
    from server.service.indexing.session_records import unit_records
    from server.service.transfers.workspace import ingest_workspace

    svc, owner = rt.service, rt.identity
    ids: dict[str, str] = {}
    for i, (agent, scope, category, text, tags, prio) in enumerate(DEMO_MEMORIES):
        who = owner if agent == "owner" else Identity(project_id=owner.project_id, agent_id=agent)
        meta = MemoryMetadata(tags=tags, priority=prio)
        item = MemoryInput(content=text, scope=scope, category=category, metadata=meta)
        ids[f"m{i}"] = svc.remember(who, item).memoryId
    for i in range(20):
        svc.remember(owner, MemoryInput(content=f"Standup note {i + 1}: reviewed PR #{140 + i}, "
                                        "left comments on error handling.",
                                        metadata=MemoryMetadata(tags=["standup"], priority=3)))  # fmt: skip
    if xss:
        ids["xss"] = svc.remember(owner, MemoryInput(content=XSS, scope="team")).memoryId
    alice = Identity(project_id=owner.project_id, agent_id="alice")
    ids["alice_private"] = svc.remember(
        alice, MemoryInput(content="Feature flags are cleaned up every second sprint.")
    ).memoryId
    ids["proposal"] = svc.remember(
        alice,
        MemoryInput(content="The nightly export job retries three times, then pages on-call."),
    ).memoryId
    review.share_learning(svc, review.ReviewPolicy("on", owner.agent_id), alice, ids["proposal"])
    g = rt.graphs
    g.graph.create_entities(owner, [EntityInput(name=n, entityType=t, observations=o)
                                    for n, t, o in DEMO_ENTITIES])  # fmt: skip
    if xss:
        g.graph.add_observations(owner, [{"entityName": "payments-sandbox", "contents": [XSS]}])
    g.graph.create_relations(owner, [Relation.model_validate({"from": a, "to": b, "relationType": r})
                                     for a, b, r in DEMO_RELATIONS])  # fmt: skip
    g.lessons.create_lessons(owner, [
        demo_lesson("NPM_PEER_CONFLICT", "ERESOLVE unable to resolve dependency tree", 0.9, 12),
        demo_lesson("NPM_LOCKFILE_DRIFT", "npm ERR! `npm ci` can only install with an up-to-date lockfile", 0.75, 4),
        demo_lesson("NODE_GYP_PYTHON", "gyp ERR! find Python: Python is not set", 0.5, 2),
    ])  # fmt: skip
    t0 = utcnow()
    turns = [exchanges.TurnText(role, text, i) for i, (role, text) in enumerate(DEMO_SESSION)]
    session_records = []  # as the session indexer stores them: one record per exchange
    for group in exchanges.split(turns):
        units = exchanges.units(group)
        meta = {"timestamp": (t0 + timedelta(seconds=30 * group[0].index)).isoformat(),
                "gitBranch": "fix/invoice-tz", "cwd": "/home/dev/shop"}  # fmt: skip
        part_ids = [str(uuid.uuid4()) for _ in units]
        session_records += unit_records(owner, "~/.claude/projects/shop/6f1c2d9e-demo.jsonl",
                                        "6f1c2d9e-demo", units, meta, part_ids)  # fmt: skip
    rt.engine.add(session_records)
    ingest_workspace(rt, owner, make_demo_folder(folder))
    return ids


def form_fields(html: str, form_id: str) -> dict[str, str]:
    """The fields a browser submits for form ``form_id`` when the user changes nothing: a text
    input's value without line breaks, a textarea without the line break after its start tag
    and with CR LF line ends, a select's selected option."""
    from html.parser import HTMLParser

    class Form(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.inside, self.fields, self.area, self.select = False, {}, None, None
            self.areas: set[str] = set()

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "form":
                self.inside = a.get("id") == form_id
            elif not self.inside:
                return
            elif tag == "input" and a.get("name"):
                value = a.get("value") or ""
                if a.get("type", "text") == "text":
                    value = value.replace("\r", "").replace("\n", "")
                self.fields[a["name"]] = value
            elif tag == "textarea":
                self.area = a["name"]
                self.areas.add(self.area)
                self.fields[self.area] = ""
            elif tag == "select":
                self.select = a["name"]
            elif tag == "option" and self.select and "selected" in a:
                self.fields[self.select] = a.get("value") or ""

        def handle_endtag(self, tag):
            if tag == "form":
                self.inside = False
            elif tag == "textarea":
                self.area = None
            elif tag == "select":
                self.select = None

        def handle_data(self, data):
            if self.area is not None:
                self.fields[self.area] += data

    parser = Form()
    parser.feed(html)
    fields = parser.fields
    for name in parser.areas:
        value = fields[name].removeprefix("\n")
        fields[name] = value.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")
    return fields
