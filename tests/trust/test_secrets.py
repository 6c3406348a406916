"""The secret scanner: detection per kind, the three policies, redaction, no false positives.

Every "secret" here is fake: built at run time from a seeded RNG and split prefixes, so the
repository itself never contains a string that a push-protection scanner would take for a live
credential.
"""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import ValidationError

from retrieval.errors import InvalidInput
from server.service.trust.secret_scan.secrets import (
    KINDS,
    Finding,
    SecretPolicy,
    apply_policy,
    policy_from_env,
    scan,
)

_RNG = random.Random(20240514)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"


def _rand(n: int, alphabet: str = _ALNUM) -> str:
    """Random-looking text; mixes letters and digits whenever the alphabet has both."""
    while True:
        s = "".join(_RNG.choice(alphabet) for _ in range(n))
        if not (any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)):
            return s
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s):
            return s


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Case:
    kind: str
    before: str
    secret: str
    after: str

    @property
    def text(self) -> str:
        return self.before + self.secret + self.after

    def __str__(self) -> str:  # pytest id
        return self.kind


_PEM = "PRIVATE" + " KEY-----"
_PEM_BODY = "\n".join(_rand(64, _B64) for _ in range(4)) + "\n" + _rand(24, _B64) + "=="

CASES = [
    Case("aws_access_key_id", "aws_access_key_id = ", "AK" + "IA" + _rand(16, _UPPER_DIGITS), "\n"),
    Case(
        "aws_secret_access_key",
        "aws_secret_access_key = ",
        _rand(20, _B64) + "/" + _rand(19, _B64),
        "\nregion = us-east-1",
    ),
    Case("github_token", "token for CI: ", "gh" + "p_" + _rand(36), " (expires in 30 days)"),
    Case(
        "github_token",
        "fine-grained: ",
        "github" + "_pat_" + _rand(22) + "_" + _rand(59),
        ".",
    ),
    Case("gitlab_token", "GL: ", "gl" + "pat-" + _rand(20, _URLSAFE), " ok"),
    Case(
        "private_key",
        "deploy key follows\n",
        "-----BEGIN RSA " + _PEM + "\n" + _PEM_BODY + "\n-----END RSA " + _PEM,
        "\nand that was the key.",
    ),
    Case(
        "private_key",
        "truncated paste: ",
        "-----BEGIN OPENSSH " + _PEM + "\n" + _PEM_BODY,
        "\nThe rest was cut off.",
    ),
    Case(
        "slack_token",
        "slack: ",
        "xo" + "xb-" + _rand(11, string.digits) + "-" + _rand(13, string.digits) + "-" + _rand(24),
        " for #alerts",
    ),
    Case(
        "slack_webhook_url",
        "post to ",
        "https://hooks.slack.com/services/T"
        + _rand(8, _UPPER_DIGITS)
        + "/B"
        + _rand(10, _UPPER_DIGITS)
        + "/"
        + _rand(24),
        " when the build fails",
    ),
    Case("stripe_key", "STRIPE=", "sk" + "_live_" + _rand(24), "\n"),
    Case("stripe_key", "test mode key ", "rk" + "_test_" + _rand(32), " restricted"),
    Case("openai_api_key", "OPENAI: ", "sk" + "-proj-" + _rand(48, _URLSAFE), " (project key)"),
    Case("openai_api_key", "legacy ", "sk" + "-" + _rand(48), "."),
    Case(
        "anthropic_api_key",
        "use ",
        "sk" + "-ant-api03-" + _rand(93, _URLSAFE) + "AA",
        " for claude",
    ),
    Case(
        "google_api_key", "maps key ", "AI" + "za" + _rand(35, _URLSAFE), " restricted to referrers"
    ),
    Case(
        "google_oauth_client_secret",
        '"client_secret": "',
        "GOC" + "SPX-" + _rand(28, _URLSAFE),
        '"',
    ),
    Case(
        "jwt",
        "session cookie ",
        _b64url({"alg": "HS256", "typ": "JWT"})
        + "."
        + _b64url({"sub": "1234567890", "name": "Test Person", "iat": 1716000000})
        + "."
        + _rand(43, _URLSAFE),
        "; Path=/",
    ),
    Case(
        "password_assignment",
        'db:\n  host: db.internal\n  password: "',
        "Xk9#mQ2v" + _rand(6) + "!",
        '"\n  pool: 5',
    ),
    Case("password_assignment", "export DB_PASSWORD=", "Tr0ub4dor&3" + _rand(4), "\necho done"),
    Case("password_assignment", "conn = connect(user='app', password='", "pW" + _rand(10), "')"),
    Case(
        "password_assignment",
        "Server=tcp:db.internal,1433;User Id=app;Password=",
        "Zr7" + _rand(9),
        ";Encrypt=True;",
    ),
    Case(
        "connection_string",
        "DATABASE_URL=postgres://app:",
        "Qm4" + _rand(13),
        "@db.internal:5432/app",
    ),
    Case(
        "connection_string",
        "mongo at mongodb+srv://svc:",
        _rand(18, _URLSAFE),
        "@cluster0.mongodb.net/prod",
    ),
    Case("basic_auth_url", "curl https://deploy:", "hT5" + _rand(15), "@ci.internal/hook"),
    Case(
        "generic_api_key_assignment",
        'WEATHER_API_KEY = "',
        _rand(32),
        '"  # from the dashboard',
    ),
    Case("generic_api_key_assignment", "client_secret: ", _rand(40, _URLSAFE), "\nscope: read"),
    Case("generic_api_key_assignment", "const key = '", _rand(28), "';"),
    Case(
        "bearer_token",
        "curl -H 'Authorization: Bearer ",
        _rand(40, _URLSAFE + "."),
        "' https://api.internal/v1",
    ),
    Case(
        "basic_auth_header",
        "Authorization: Basic ",
        base64.b64encode(("deploy:" + _rand(14)).encode()).decode(),
        "\nAccept: */*",
    ),
    Case(
        "azure_storage_key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
        _rand(86, _B64) + "==",
        ";EndpointSuffix=core.windows.net",
    ),
    Case("npm_token", "//registry.npmjs.org/:_authToken=", "np" + "m_" + _rand(36), "\n"),
    Case("pypi_token", "password = ", "py" + "pi-AgEIcHlwaS5vcmc" + _rand(60, _URLSAFE), "\n"),
    Case("huggingface_token", "HF: ", "h" + "f_" + _rand(34), " read-only"),
    Case(
        "sendgrid_api_key",
        "mail via ",
        "S" + "G." + _rand(22, _URLSAFE) + "." + _rand(43, _URLSAFE),
        " ok",
    ),
    Case(
        "telegram_bot_token",
        "bot ",
        _rand(10, string.digits) + ":" + "A" + "A" + _rand(33, _URLSAFE),
        " polls updates",
    ),
]

COVERED = sorted({c.kind for c in CASES})


def test_cases_cover_many_kinds():
    assert len(COVERED) >= 15
    assert set(COVERED) <= KINDS
    # every kind the scanner knows about has at least one positive example here
    assert set(COVERED) == KINDS


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize("case", CASES, ids=str)
def test_scan_finds_the_secret_exactly(case: Case):
    findings = scan(case.text)
    assert len(findings) == 1, findings
    (f,) = findings
    assert isinstance(f, Finding)
    assert f.kind == case.kind
    assert (f.start, f.end) == (len(case.before), len(case.before) + len(case.secret))
    assert f.preview.endswith("…")
    assert case.secret not in f.preview
    assert len(f.preview) <= 5
    assert case.secret.startswith(f.preview[:-1])


# --------------------------------------------------------------------------- policies


@pytest.mark.parametrize("case", CASES, ids=str)
def test_warn_keeps_text_and_warns(case: Case):
    stored, warnings = apply_policy(case.text, SecretPolicy.warn)
    assert stored == case.text
    assert len(warnings) == 1
    (w,) = warnings
    assert f"contains a {case.kind} (" in w
    assert "never store credentials in memory" in w
    assert case.secret not in w


@pytest.mark.parametrize("case", CASES, ids=str)
def test_block_raises_without_leaking(case: Case):
    with pytest.raises(InvalidInput) as exc_info:
        apply_policy(case.text, SecretPolicy.block)
    err = exc_info.value
    assert err.code == "invalid_input"
    assert case.kind in err.message
    start = len(case.before)
    assert err.data == {
        "policy": "secret",
        "findings": [{"kind": case.kind, "start": start, "end": start + len(case.secret)}],
    }
    assert case.secret not in json.dumps(err.to_dict())
    assert case.secret[:8] not in json.dumps(err.to_dict())


@pytest.mark.parametrize("case", CASES, ids=str)
def test_redact_replaces_only_the_secret(case: Case):
    stored, warnings = apply_policy(case.text, SecretPolicy.redact)
    assert stored == f"{case.before}[REDACTED:{case.kind}]{case.after}"
    assert case.secret not in stored
    assert len(warnings) == 1 and "redacted a " + case.kind in warnings[0]
    assert case.secret not in warnings[0]
    # redacting is idempotent: the placeholder itself is not a secret
    assert scan(stored) == []
    assert apply_policy(stored, SecretPolicy.redact) == (stored, [])


@pytest.mark.parametrize("case", CASES, ids=str)
def test_disabled_scan_is_a_no_op(case: Case):
    assert apply_policy(case.text, None) == (case.text, [])


def test_policy_accepts_plain_strings():
    case = CASES[0]
    assert apply_policy(case.text, "redact")[0] == apply_policy(case.text, SecretPolicy.redact)[0]


def test_redaction_keeps_surrounding_text_with_several_secrets():
    gh = "gh" + "p_" + _rand(36)
    aws = "AK" + "IA" + _rand(16, _UPPER_DIGITS)
    pw = "Vq8$" + _rand(10)
    text = (
        "Notes from the incident review (2024-05-14).\n"
        f"The leaked token was {gh}, found in a CI log.\n"
        f"The AWS key {aws} was rotated within the hour.\n"
        f'Also: password = "{pw}" in the staging config.\n'
        "Action items: enable push protection and rotate everything.\n"
    )
    stored, warnings = apply_policy(text, SecretPolicy.redact)
    for secret in (gh, aws, pw):
        assert secret not in stored
        assert not any(secret in w for w in warnings)
    assert stored == (
        "Notes from the incident review (2024-05-14).\n"
        "The leaked token was [REDACTED:github_token], found in a CI log.\n"
        "The AWS key [REDACTED:aws_access_key_id] was rotated within the hour.\n"
        'Also: password = "[REDACTED:password_assignment]" in the staging config.\n'
        "Action items: enable push protection and rotate everything.\n"
    )
    assert [w.split(" (")[0] for w in warnings] == [
        "redacted a github_token",
        "redacted a aws_access_key_id",
        "redacted a password_assignment",
    ]


def test_block_message_names_every_kind():
    text = f"a {'gh' + 'p_' + _rand(36)} and b {'AI' + 'za' + _rand(35, _URLSAFE)}"
    with pytest.raises(InvalidInput) as exc_info:
        apply_policy(text, SecretPolicy.block)
    assert "github_token" in exc_info.value.message
    assert "google_api_key" in exc_info.value.message
    assert [f["kind"] for f in exc_info.value.data["findings"]] == [
        "github_token",
        "google_api_key",
    ]


def test_clean_text_passes_every_policy_untouched():
    text = "Remember to reset your password in settings."
    for policy in (*SecretPolicy, None):
        assert apply_policy(text, policy) == (text, [])
    assert scan("") == []


# --------------------------------------------------------------------------- de-duplication


def test_overlapping_findings_are_deduplicated_most_specific_wins():
    key = "sk" + "-proj-" + _rand(48, _URLSAFE)
    findings = scan(f'OPENAI_API_KEY = "{key}"')
    assert [f.kind for f in findings] == ["openai_api_key"]

    gh = "gh" + "p_" + _rand(36)
    assert [f.kind for f in scan(f"password={gh}")] == ["github_token"]

    jwt = CASES[[c.kind for c in CASES].index("jwt")].secret
    findings = scan(f"Authorization: Bearer {jwt}")
    assert [f.kind for f in findings] == ["jwt"]


def test_fake_key_in_the_style_of_the_brief_is_detected():
    key = "AKIA" + "Q3EXAMPLE7ZK2M4P"
    assert [(f.kind, f.start, f.end) for f in scan(f"id {key} end")] == [
        ("aws_access_key_id", 3, 23)
    ]


def test_finding_is_a_frozen_pydantic_model():
    (f,) = scan(CASES[0].text)
    assert f.model_dump() == {
        "kind": "aws_access_key_id",
        "start": f.start,
        "end": f.end,
        "preview": "AKIA…",
    }
    with pytest.raises(ValidationError):
        f.kind = "other"


def _cpu(text: str) -> float:
    scan(text)  # the automata's states, built once
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        scan(text)
        best = min(best, time.thread_time() - started)
    return best


def test_scan_stays_linear_on_large_and_adversarial_input():
    corpus = (Path(__file__).parents[1] / "data" / "prose_and_code.txt").read_text(encoding="utf-8")
    for unit, times in (
        (corpus, 4),
        ("password=", 400),
        ("key=", 1_000),
        ("key=1", 400),
        ("api_key='a1'", 200),
        (("-----BEGIN " + _PEM + "\n" + _rand(64, _B64) + "\n"), 40),
    ):
        small, large = _cpu(unit * times), _cpu(unit * times * 8)
        # eight times the text: eight times the time (quadratic: sixty-four), three times that
        # for a loaded machine's noise, a floor under tiny times
        assert large < 24 * max(small, 0.002), (unit[:20], small, large)


def test_preview_of_a_short_secret_shows_at_most_a_third():
    (f,) = scan('password = "Zr7qP2x"')
    assert f.preview == "Zr…"


# --------------------------------------------------------------------------- false positives


@pytest.mark.parametrize(
    "text",
    [
        'password = ""',
        'password = "***"',
        'password = "********"',
        'password = "<password>"',
        'password = "${PASSWORD}"',
        "password: ${DB_PASSWORD}",
        'password = "{{ db_password }}"',
        'password = "changeme"',
        'password = "password123"',
        'password = "your_password_here"',
        'password = "example-password"',
        "password = %(password)s",
        "password: str",
        "def connect(password: str = None) -> None: ...",
        "password = get_password()",
        "password = settings.database.password",
        "if password == confirm_password:",
        "WHERE password = $1",
        "WHERE password = :password",
        "password = None",
        'api_key = "abc"',
        'api_key = "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"',
        'api_key = "user_profile_cache_name_v2"',
        'token = "1111111111111111111111111"',
        'next_page_token = "' + _rand(32) + '"',
        'cache_key = "' + _rand(32) + '"',
        'key = "ckpt_2024_model_final_v3"',
        "mysql://root:<password>@127.0.0.1:3306/mysql",
        "wss://user:pass@nats.example.com",
        "redis://:${REDIS_PASSWORD}@cache:6379",
        "http://localhost:8080@proxy",
        "Authorization: Bearer $TOKEN",
        "Authorization: Bearer <token>",
        "AKIA" + "X" * 16,
        "AKIA" + "IOSFODNN7" + "EXAMPLE",  # the AWS documentation key
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN " + "OPENSSH PRIVATE KEY-----",  # a mention, no key material
        'START = b"-----BEGIN RSA ' + 'PRIVATE KEY-----"\nEND = b"-----END RSA PRIVATE KEY-----"',
        "eyJhbGciOiJIUzI1NiJ9.not-a-jwt",
        "Pass :func:`~pkg.scoring.scores` to the loss",
        "PWD=/home/alice/projects",
        "using GraphPass = std::function<void(Graph&)>;",
        '"IAMUserChangePassword": "arn:aws:iam::aws:policy/IAMUserChangePassword",',
        '"KeyStorePassword": "The password for the kmsuser account in the cluster."',
        '"ClientRequestToken": "a8ca07e4-61ec-4399-99f4-19853801bcd5",',
        '"ARN": "arn:aws:secretsmanager:us-west-2:123456789012:secret:MyTestSecret-a1b2c3"',
        "private_key: Ed25519PrivateKey | Ed448PrivateKey",
        "self.cross_attn_image_to_token = Sam3TrackerAttention(config)",
        '"service_account_token": "V1ServiceAccountTokenProjection"',
        "--input Bucket=my-bucket,Key=dcp/17_12_22-103226.Developer_CL.tar",
        '"CHALLENGE_PASSWORD": "challengePassword",',
        ".. _`Bearer Token`: https://tools.ietf.org/html/rfc6750",
    ],
)
def test_placeholders_and_references_are_not_secrets(text: str):
    assert scan(text) == []


def test_no_false_positives_in_prose_and_code_corpus():
    corpus = Path(__file__).parents[1] / "data" / "prose_and_code.txt"
    text = corpus.read_text(encoding="utf-8")
    assert len(text.splitlines()) >= 80
    assert scan(text) == []
    # line by line too, so context from neighbouring lines can't mask a false positive
    noisy = [line for line in text.splitlines() if scan(line)]
    assert noisy == []


# --------------------------------------------------------------------------- env


def test_policy_from_env_default_and_values():
    assert policy_from_env({}) is SecretPolicy.warn
    assert policy_from_env({"PATTERN_SECRET_POLICY": ""}) is SecretPolicy.warn
    assert policy_from_env({"PATTERN_SECRET_POLICY": "block"}) is SecretPolicy.block
    assert policy_from_env({"PATTERN_SECRET_POLICY": " Redact "}) is SecretPolicy.redact


@pytest.mark.parametrize("flag", ["true", "TRUE", "1", "yes", "Yes"])
def test_policy_from_env_disabled(flag: str):
    env = {"PATTERN_DISABLE_CONTENT_SCAN": flag, "PATTERN_SECRET_POLICY": "block"}
    assert policy_from_env(env) is None


@pytest.mark.parametrize("flag", ["false", "0", "no", ""])
def test_policy_from_env_not_disabled(flag: str):
    assert policy_from_env({"PATTERN_DISABLE_CONTENT_SCAN": flag}) is SecretPolicy.warn


def test_policy_from_env_invalid_value():
    with pytest.raises(InvalidInput) as exc_info:
        policy_from_env({"PATTERN_SECRET_POLICY": "shout"})
    msg = exc_info.value.message
    assert "PATTERN_SECRET_POLICY" in msg and "'shout'" in msg
    assert "warn" in msg and "block" in msg and "redact" in msg
    assert exc_info.value.data["allowed"] == ["warn", "block", "redact"]


def test_policy_from_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATTERN_SECRET_POLICY", "redact")
    monkeypatch.delenv("PATTERN_DISABLE_CONTENT_SCAN", raising=False)
    assert policy_from_env() is SecretPolicy.redact


def test_module_does_not_import_mcp():
    code = (
        "import sys, server.service.trust.secret_scan.secrets; "
        "bad = [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
