"""Secrets never reach the audit log or a job record in clear; ordinary text stays readable.

The corpus holds the shapes the issue found in clear (AWS keys, Authorization headers,
OpenSSH private keys, sk_live_, github_pat_, AIza, JWTs, DB_PASS=, SECRET_KEY=,
--password, -pX, curl -u, URL userinfo) and more. Each is checked by the function, then
over the real daemon: a bash tools/call and a background_run carrying it, after which
.toold/audit.jsonl and .toold/jobs/*.json must not contain the secret. The values are
made up (assembled at run time so that secret scanners do not flag this file).
"""

from __future__ import annotations

import base64
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient
from tests.waiting import wait_until
from toold.permissions.audit import AuditLog
from toold.permissions.redaction import REDACTED, redact, redact_text

R = "Xq7Lm2Pz9Rk4Vt8Wn3Bc6Hd1Jf5Gs0Ya"  # 34 characters of made-up randomness
HEX40 = "3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39"
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
PEM = "-----BEGIN {0}PRIVATE KEY-----\n" + KEY_BODY + "\n" + R + "\n-----END {0}PRIVATE KEY-----"

# (text, the secret part that must not survive)
SECRETS: list[tuple[str, str]] = [
    (f"AWS_SECRET_ACCESS_KEY={R}abcdef", f"{R}abcdef"),
    ("AWS_ACCESS_KEY_ID=AKIA" + "IOSFODNN7EXAMPLE", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("aws s3 ls --profile x # ASIA" + "Y34FZKBOKMUTVV7A", "ASIA" + "Y34FZKBOKMUTVV7A"),
    (f'aws_secret_access_key = "{R}wxyz"', f"{R}wxyz"),
    (f"curl -H 'Authorization: Basic {R}=' https://api.example", f"{R}="),
    (f'curl -H "Authorization: Bearer {R}" https://api.example', R),
    (f"curl -H 'Authorization: token ghx{R}' https://api.example", f"ghx{R}"),
    (f"curl -H 'Proxy-Authorization: Digest user{R}' x", f"user{R}"),
    (f"curl -H 'X-Api-Key: {R}' https://api.example", R),
    (f"echo '{PEM.format('OPENSSH ')}' > id", KEY_BODY),
    (f"echo '{PEM.format('RSA ')}'", KEY_BODY),
    (f"echo '{PEM.format('')}'", KEY_BODY),
    (f"echo '{PEM.format('EC ')}'", R),
    ("stripe login --api-key sk_live_" + R[:24], "sk_live_" + R[:24]),
    ("export STRIPE=rk_live_" + R[:24], "rk_live_" + R[:24]),
    (
        "git clone https://github_pat_11ABCDEFG0" + R + "@github.com/o/r",
        "github_pat_11ABCDEFG0" + R,
    ),
    ("GH=ghp_" + R + "ab", "ghp_" + R + "ab"),
    ("curl https://maps.googleapis.com/x?key=AIza" + R + "a", "AIza" + R + "a"),
    (f"curl -H 'x-token-jwt {JWT}' https://a.example", JWT),
    (f"DB_PASS=hunter2{R[:6]} ./migrate", f"hunter2{R[:6]}"),
    (f"SECRET_KEY='{R[:20]}' python manage.py runserver", R[:20]),
    (f"export API_TOKEN={R}", R),
    (f'{{"password": "pw-{R[:10]}"}}', f"pw-{R[:10]}"),
    (f'{{"apiKey": "{R[:18]}"}}', R[:18]),
    (f"client_secret: {R[:22]}", R[:22]),
    (f"PGPASSWORD=pg{R[:9]} psql -h db", f"pg{R[:9]}"),
    (f"MYSQL_PWD=my{R[:9]} mysql", f"my{R[:9]}"),
    (f"DATABASE_CREDENTIALS=cr{R[:12]}", f"cr{R[:12]}"),
    (f"tool --password s3cr{R[:8]}", f"s3cr{R[:8]}"),
    (f"tool --password=s3cr{R[:8]}", f"s3cr{R[:8]}"),
    (f"vault login --token hv{R[:20]}", f"hv{R[:20]}"),
    (f"docker login --pass dk{R[:10]} -u me", f"dk{R[:10]}"),
    (f"mysql -u root -pMy{R[:8]} db", f"My{R[:8]}"),
    (f"mysqldump -uroot -p'q{R[:8]}' db", f"q{R[:8]}"),
    (f"curl -u admin:ad{R[:9]} https://a.example", f"ad{R[:9]}"),
    (f"curl --user admin:us{R[:9]} https://a.example", f"us{R[:9]}"),
    (f"git clone https://user:ur{R[:9]}@gitlab.example/r.git", f"ur{R[:9]}"),
    (f"psql postgres://app:pg{R[:9]}@db:5432/app", f"pg{R[:9]}"),
    ("export OPENAI=sk-" + R + "T3BlbkFJ", "sk-" + R + "T3BlbkFJ"),
    ("ANTHROPIC=sk-ant-api03-" + R, "sk-ant-api03-" + R),
    ("SLACK=xoxb-" + "1234567890-0987654321-" + R[:24], "xoxb-1234567890-0987654321-" + R[:24]),
    ("curl https://hooks.slack.com/services/T0000/B0000/" + R[:24], R[:24]),
    ("glab auth --with glpat-" + R[:20], "glpat-" + R[:20]),
    ("huggingface-cli login hf_" + R, "hf_" + R),
    ("npm config set //r/:_authToken npm_" + R + "ab", "npm_" + R + "ab"),
    ("twine upload -p pypi-AgEIcHlwaS5vcmc" + R, "pypi-AgEIcHlwaS5vcmc" + R),
    ("SENDGRID=SG." + R[:22] + "." + R + "abcdefghi", "SG." + R[:22]),
    ("sshpass -p ss" + R[:8] + " ssh host", "ss" + R[:8]),
    ("redis-cli -h r -a rd" + R[:10] + " ping", "rd" + R[:10]),
    ("GOOGLE=ya29." + R + "_xy", "ya29." + R + "_xy"),
    (f"AZURE=DefaultEndpointsProtocol=https;AccountName=a;AccountKey={R}==", f"{R}=="),
    (f"Cookie: session=ck{R[:16]}", f"ck{R[:16]}"),
    (f"docker login -u me -p dl{R[:12]} registry.example", f"dl{R[:12]}"),
    (f"echo 'machine api.example login me password nr{R[:10]}' >> ~/.netrc", f"nr{R[:10]}"),
    (f"curl 'https://b.s3.example/o?X-Amz-Signature=ab{R[:20]}&x=1'", f"ab{R[:20]}"),
    (f"mongosh mongodb+srv://app:mg{R[:10]}@cluster0.example/db", f"mg{R[:10]}"),
    (f"curl 'https://api.example/me?access_token=at{R[:18]}&v=2'", f"at{R[:18]}"),
    (f"TF_VAR_db_password=tf{R[:10]} terraform apply", f"tf{R[:10]}"),
    (f'{{".git-credentials": "gc{R[:10]}"}}', f"gc{R[:10]}"),
    (f"tool --auth=au{R[:10]} -v", f"au{R[:10]}"),
]

READABLE = [
    "max_tokens=4096",
    "anthropic --max-tokens 1024",
    f"git show {HEX40}",
    "sha256sum: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "ls -la /usr/lib/python3.11/site-packages/detect_secrets/plugins",
    "pytest -p no:cacheprovider tests/unit",
    "mkdir -p build/out && cd build/out",
    "docker run -u 1000:1000 --rm alpine true",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "keyboard_layout=us",
    "tokenizer=bert-base-uncased",
    "export PATH=/usr/local/bin:$PATH",
    "git clone https://github.com/owner/repo.git",
    "git clone git@github.com:owner/repo.git",
    "curl 'https://example.com/api?page=2&sort=asc'",
    "The passenger list is in docs/passengers.md",
    "grep -rn 'TODO' src/",
    "author: Jane Doe",
    "python -m http.server 8000",
    "npm run build -- --mode production",
    "ssh -p 2222 deploy@example.com",
    "ps -aux | head",
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_every_secret_shape_is_redacted(text: str, secret: str) -> None:
    shown = redact_text(text)
    assert secret not in shown and REDACTED in shown, shown


@pytest.mark.parametrize("text", READABLE)
def test_ordinary_text_stays_readable(text: str) -> None:
    assert redact_text(text) == text


def test_names_and_nesting() -> None:
    value = {"max_tokens": 5, "headers": {"X-Auth-Token": "t", "Accept": "json"}, "list": [R]}
    assert redact(value) == {
        "max_tokens": 5,
        "headers": {"X-Auth-Token": REDACTED, "Accept": "json"},
        "list": [R],  # a bare random string: no rule or plugin can call it a secret
    }


def test_a_private_key_cut_before_its_end_is_redacted_to_the_end() -> None:
    text = "cat > k <<EOF\n" + PEM.format("OPENSSH ")[:60]
    assert redact_text(text) == "cat > k <<EOF\n" + REDACTED


def test_the_audit_log_never_follows_a_symlink(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text("", encoding="utf-8")
    (tmp_path / ".toold").mkdir()
    audit = tmp_path / ".toold" / "audit.jsonl"
    audit.symlink_to(outside)
    log = AuditLog(audit)
    log.record(event="call", tool="bash", arguments={"command": "true"})
    log.record(event="call", tool="bash", arguments={"command": "again"})
    log.close()
    assert outside.read_text(encoding="utf-8") == ""
    [error] = [r for r in caplog.records if r.levelname == "ERROR"]  # once, not per call
    assert "audit log" in error.getMessage() and "symlink" in error.getMessage()
    # A link swapped in for an open log is noticed (lstat) and refused too.
    audit.unlink()
    log.record(event="call", tool="bash", arguments={"command": "first"})
    assert "first" in audit.read_text(encoding="utf-8")
    audit.rename(tmp_path / "rotated.jsonl")
    audit.symlink_to(outside)
    log.record(event="call", tool="bash", arguments={"command": "second"})
    log.close()
    assert outside.read_text(encoding="utf-8") == ""


# -- over the real daemon ---------------------------------------------------------------


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[WireClient, Path]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    client = WireClient(workspace)
    client.initialize(rootUri=workspace.as_uri())
    yield client, workspace
    client.close()


def test_no_secret_reaches_the_audit_log_or_a_job_record(
    daemon: tuple[WireClient, Path],
) -> None:
    client, workspace = daemon
    jobs: list[str] = []
    for text, _ in SECRETS:
        command = f"true {json.dumps(text)}"
        assert client.tool("bash", command=command)["isError"] is False
        started = client.tool("background_run", command=command)
        assert started["isError"] is False, started
        jobs.append(started["content"])
    for text in READABLE:
        client.tool("bash", command=f"true {json.dumps(text)}")
    audit = workspace / ".toold" / "audit.jsonl"
    wait_until(
        lambda: (
            audit.is_file()
            and len(audit.read_text().splitlines()) >= 2 * len(SECRETS) + len(READABLE)
        ),
        "every call in the audit log",
    )
    logged = audit.read_text(encoding="utf-8")
    records = "\n".join(
        p.read_text(encoding="utf-8")
        for p in sorted((workspace / ".toold" / "jobs").glob("*.json"))
    )
    assert records.count('"command"') == len(SECRETS)
    held = [s for _, s in SECRETS if s not in logged and json.dumps(s)[1:-1] not in logged]
    assert held == [s for _, s in SECRETS], "secrets in clear in audit.jsonl"
    in_jobs = [s for _, s in SECRETS if s in records or json.dumps(s)[1:-1] in records]
    assert in_jobs == [], "secrets in clear in .toold/jobs/*.json"
    for text in READABLE:
        assert json.dumps(f"true {json.dumps(text)}")[1:-1] in logged, text
    assert os.path.getsize(audit) > 0


@pytest.mark.parametrize("run", ["a", "abcdef0123", "a.", "x-1", "ab://"])
def test_long_runs_are_redacted_in_linear_time(run: str) -> None:
    """A name, or a URL scheme, is matched over at most 128 (64) characters: before, every
    start inside a long run of name characters scanned to its end, and 40,000 of them
    (a background_run command, a minified file an agent writes) took 36 s with the GIL
    held. 200,000 now take about a second; the quadratic version would outlast the
    suite's timeout."""
    text = run * (200_000 // len(run))
    assert redact_text(text) == text
    secret = f"{text} API_KEY=s3cr3t-value-1234 {text}"
    assert redact_text(secret) == f"{text} API_KEY=[REDACTED] {text}"


def test_keyword_plugins_run_on_their_lines_of_a_long_text() -> None:
    """detect-secrets' keyword plugins see only the lines holding a keyword (they cost
    100 ms per 64 KiB of log lines); what they find is redacted at its place."""
    lines = [f"2026-12-02 INFO item {i} path=/srv/data/{i}.json" for i in range(1000)]
    lines[500] = f'contraseña = "{R[:14]}"'  # no rule of toold's knows the word
    lines[700] = "cloudant_password: " + HEX40[:32] * 2
    shown = redact_text("\n".join(lines)).split("\n")
    changed = {i: line for i, line in enumerate(shown) if line != lines[i]}
    assert changed == {500: f'contraseña = "{REDACTED}"', 700: f"cloudant_password: {REDACTED}"}


def test_keyword_plugins_see_a_keyword_in_the_middle_of_a_long_line() -> None:
    """The keyword plugins run on windows around the keywords they could match, not on
    whole lines (a 100 KiB line of base64 or minified code cost 100 ms and more): a
    secret after a keyword in the middle of such a line is still found at its place."""
    blob = base64.b64encode(random.Random(7).randbytes(75_000)).decode()
    text = f'{blob} contraseña = "{R[:14]}" x cloudant_password: {HEX40[:32] * 2} {blob}'
    assert redact_text(text) == (
        f'{blob} contraseña = "{REDACTED}" x cloudant_password: {REDACTED} {blob}'
    )
