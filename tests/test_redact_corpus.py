"""Redaction against a corpus of common credential formats: each value is generated here (so no real
secret is ever stored), planted in each capture kind (text, JSON, XML) and in the environment of a
bundle (host.json `env`), and must not appear in clear in the report's JSON, its Markdown or its
`--include-raw` captures. The same value keeps the same placeholder wherever it appears."""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path
from typing import Callable, List, Tuple
from xml.sax.saxutils import escape as xml_escape

import pytest

from mlprobe.scan.host import ReplayHost
from tests.report_doc import build_report, markdown
from mlprobe.report.envelope import ReportOptions

from .conftest import FIXTURES

BASE = FIXTURES / "synthetic-linux-nvidia-secrets"
RNG = random.Random(14)


def rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits
B64 = string.ascii_letters + string.digits + "+/"


def pem(kind: str) -> Tuple[str, List[str]]:
    body = [rand(64, B64) for _ in range(5)] + [rand(24, B64) + "=="]
    block = f"-----BEGIN {kind}-----\n" + "\n".join(body) + f"\n-----END {kind}-----"
    return block, body


def _formats() -> List[Tuple[str, str, List[str]]]:
    """(format name, text as it appears in a file or a paste, the secret values in it)."""
    out: List[Tuple[str, str, List[str]]] = []

    def add(name: str, make: Callable[[], Tuple[str, List[str]]]) -> None:
        text, values = make()
        out.append((name, text, values))

    k = rand(40, string.ascii_letters + string.digits + "+/")
    add("aws credentials file", lambda: (f"[default]\naws_access_key_id = AKIA{rand(16, UPPER)}\n"
                                         f"aws_secret_access_key = {k}", [k]))
    v = rand(40)
    add("AWS env", lambda: (f"AWS_SECRET_ACCESS_KEY={v}", [v]))
    v2 = "AKIA" + rand(16, UPPER)
    add("AWS access key id", lambda: (f"key id {v2} in a log line", [v2]))
    v3 = rand(120, B64)
    add("aws session token", lambda: (f"aws_session_token = {v3}", [v3]))
    v4 = rand(14, string.ascii_letters + string.digits + "!#%&")
    add("yaml password", lambda: (f"  password: {v4}", [v4]))
    v5 = rand(12)
    add("ini Password", lambda: (f'Password = "{v5}"', [v5]))
    add("quoted with spaces", lambda: ("DB_PASSWORD='p@ss w0rd! " + rand(6) + "'", []))
    q = "s3cr3t phrase " + rand(8)
    out[-1] = ("quoted with spaces", f"DB_PASSWORD='{q}'", [q, q.split()[-1]])
    q2 = "correct horse " + rand(8)
    add("export double-quoted", lambda: (f'export MYSQL_PASSWORD="{q2}"', [q2, q2.split()[-1]]))
    basic = base64.b64encode(f"alice:{rand(12)}".encode()).decode()
    add("Authorization Basic", lambda: (f"Authorization: Basic {basic}", [basic]))
    bearer = rand(48, string.ascii_letters + string.digits + "-._")
    add("Authorization Bearer", lambda: (f"authorization: Bearer {bearer}", [bearer]))
    prox = base64.b64encode(f"bob:{rand(10)}".encode()).decode()
    add("Proxy-Authorization", lambda: (f"Proxy-Authorization: Basic {prox}", [prox]))
    npm = "npm_" + rand(36)
    add("npm token", lambda: (f"token {npm}", [npm]))
    npmrc = rand(36)
    add("npmrc authToken", lambda: (f"//registry.example/:_authToken={npmrc}", [npmrc]))
    for kind in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY",
                 "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):
        block, body = pem(kind)
        out.append((f"PEM {kind}", block, body))
    ghp = "ghp_" + rand(36)
    add("GitHub classic", lambda: (f"GITHUB_TOKEN={ghp}", [ghp]))
    ghpat = "github_pat_" + rand(22) + "_" + rand(59)
    add("GitHub fine-grained", lambda: (f"remote with {ghpat}", [ghpat]))
    gho = "gho_" + rand(36)
    add("GitHub OAuth", lambda: (f"oauth {gho}", [gho]))
    gl = "glpat-" + rand(20)
    add("GitLab PAT", lambda: (f"CI token {gl}", [gl]))
    slack = "xoxb-" + rand(11, "0123456789") + "-" + rand(12, "0123456789") + "-" + rand(24)
    add("Slack bot", lambda: (f"slack {slack}", [slack]))
    hook = f"T{rand(8, UPPER)}/B{rand(8, UPPER)}/{rand(24)}"
    add("Slack webhook", lambda: (f"https://hooks.slack.com/services/{hook}", [hook]))
    stripe = "sk_live_" + rand(24)
    add("Stripe secret", lambda: (f"charge with {stripe}", [stripe]))
    rk = "rk_live_" + rand(24)
    add("Stripe restricted", lambda: (f"restricted {rk}", [rk]))
    oai = "sk-proj-" + rand(48)
    add("OpenAI", lambda: (f"OPENAI_API_KEY={oai}", [oai]))
    ant = "sk-ant-api03-" + rand(80, string.ascii_letters + string.digits + "-_")
    add("Anthropic", lambda: (f"key {ant}", [ant]))
    hf = "hf_" + rand(34)
    add("Hugging Face", lambda: (f"hf login --token {hf}", [hf]))
    goog = "AIza" + rand(35, string.ascii_letters + string.digits + "-_")
    add("Google API key", lambda: (f"maps {goog}", [goog]))
    jwt = "eyJ" + rand(30) + "." + "eyJ" + rand(60) + "." + rand(43, string.ascii_letters + string.digits + "-_")
    add("JWT", lambda: (f"session {jwt}", [jwt]))
    upw = rand(14)
    add("URL credentials", lambda: (f"postgres://app:{upw}@db.internal:5432/prod", [upw]))
    tw = "SK" + rand(32, HEX)
    add("Twilio", lambda: (f"twilio {tw}", [tw]))
    sg = "SG." + rand(22, string.ascii_letters + string.digits + "-_") + "." + rand(43, string.ascii_letters + string.digits + "-_")
    add("SendGrid", lambda: (f"mail {sg}", [sg]))
    mc = rand(32, HEX) + "-us12"
    add("Mailchimp", lambda: (f"mailchimp {mc}", [mc]))
    tg = rand(9, "0123456789") + ":AA" + rand(33, string.ascii_letters + string.digits + "_-")
    add("Telegram bot", lambda: (f"bot {tg}", [tg]))
    az = rand(86, B64) + "=="
    add("Azure storage", lambda: (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={az};", [az]))
    pypi = "pypi-AgEIcHlwaS5vcmc" + rand(60, string.ascii_letters + string.digits + "-_")
    add("PyPI token", lambda: (f"password = {pypi}", [pypi]))
    dock = base64.b64encode(f"carol:{rand(16)}".encode()).decode()
    add("docker config auth", lambda: ('{"auths": {"ghcr.io": {"auth": "' + dock + '"}}}', [dock]))
    nrc = rand(16)
    add("netrc", lambda: (f"machine git.example.org login dave password {nrc}", [nrc]))
    gcp_block, gcp_body = pem("PRIVATE KEY")
    gcp = json.dumps({"type": "service_account", "private_key": gcp_block + "\n"})
    add("GCP service account JSON", lambda: (gcp, gcp_body))
    cs = rand(32)
    add("client_secret", lambda: (f"client_secret: {cs}", [cs]))
    ak = rand(32)
    add("api_key lowercase", lambda: (f'api_key = "{ak}"', [ak]))
    xk = rand(32)
    add("X-API-Key header", lambda: (f"X-API-Key: {xk}", [xk]))
    shp = "shpat_" + rand(32, HEX)
    add("Shopify", lambda: (f"shop {shp}", [shp]))
    do = "dop_v1_" + rand(64, HEX)
    add("DigitalOcean", lambda: (f"doctl {do}", [do]))
    dbx = "dapi" + rand(32, HEX)
    add("Databricks", lambda: (f"databricks {dbx}", [dbx]))
    art = "AKCp" + rand(69)
    add("Artifactory", lambda: (f"artifactory {art}", [art]))
    hfenv = rand(40)
    add("HF_TOKEN env", lambda: (f"HF_TOKEN={hfenv}", [hfenv]))
    wandb = rand(40, HEX)
    add("wandb netrc-style", lambda: (f"WANDB_API_KEY={wandb}", [wandb]))
    # Connection strings and command lines that carry a password, ids of disks and cloud machines,
    # internal host names, and credentials in URLs that the rules above read too narrowly.
    azk = rand(43, B64) + "="
    add("Azure AccountKey (short)", lambda: (f"DefaultEndpointsProtocol=https;AccountName=lab;AccountKey={azk}", [azk]))
    sbk = rand(44, B64)
    add("Azure SharedAccessKey", lambda: (f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
                                          f"SharedAccessKey={sbk}", [sbk]))
    sas = rand(43, B64).replace("+", "%2B").replace("/", "%2F") + "%3D"
    add("Azure SAS sig", lambda: (f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-01-01&sig={sas}",
                                  [sas]))
    mp = rand(14)
    add("mysql -pPASSWORD", lambda: (f"mysql -u root -p{mp} -h db.example prod", [mp]))
    mq = "p w" + rand(10)
    add("mysqldump -p'quoted'", lambda: (f"mysqldump --user=app -p'{mq}' prod > dump.sql", [mq, mq.split()[-1]]))
    dp = rand(18)
    add("docker login -p", lambda: (f"docker login -u ci-bot -p {dp} registry.example.com", [dp]))
    dp2 = rand(18)
    add("podman login --password", lambda: (f"podman login --username ci --password {dp2} quay.example", [dp2]))
    ser = "S4EWNX0N" + rand(7, UPPER)
    add("udev ID_SERIAL_SHORT", lambda: (f"E: ID_SERIAL_SHORT={ser}\nE: ID_SERIAL=Samsung_SSD_970_EVO_Plus_1TB_{ser}\n"
                                         f"E: ID_WWN=0x5002538e{rand(8, HEX)}", [ser]))
    iid = "i-0" + rand(16, HEX)
    add("AWS instance id", lambda: (f"instance-id: {iid}\nrunning on {iid} in us-east-1", [iid]))
    iid2 = "i-" + rand(8, HEX)
    add("AWS instance id (short)", lambda: (f'{{"instanceId": "{iid2}", "region": "eu-west-1"}}', [iid2]))
    gid = "".join(RNG.choice("123456789") for _ in range(19))
    add("GCP instance id", lambda: (f"instance/id: {gid}", [gid]))
    kh = f"gitlab-{rand(6).lower()}.corp.internal"
    kh2 = f"bastion-{rand(6).lower()}.lab"
    add("known_hosts", lambda: (f"{kh},10.20.30.40 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{rand(43, B64)}\n"
                                f"[{kh2}]:2222 ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY{rand(40, B64)}=",
                                [kh, kh2]))
    at_pw = rand(8) + "@" + rand(8)
    add("URL password with @", lambda: (f"https://alice:{at_pw}@devpi:3141/root/pypi/+simple/", [at_pw, at_pw.split("@")[1]]))
    utok = rand(40)
    add("URL user-only token", lambda: (f"git clone https://{utok}@git.lab:8443/org/repo.git", [utok]))
    add("URL oauth2accesstoken user", lambda: ("https://oauth2accesstoken@localhost:8081/p/r/simple/",
                                               ["oauth2accesstoken"]))
    # Command lines and names that a second attack found unredacted.
    mpwd, sshp = rand(14), rand(14)
    add("MYSQL_PWD / SSHPASS assignments", lambda: (f"MYSQL_PWD={mpwd} mysql -u app\nSSHPASS={sshp} sshpass -e ssh x",
                                                   [mpwd, sshp]))
    rp = rand(16)
    add("redis-cli -a", lambda: (f"redis-cli -h cache.lab -p 6379 -a {rp} ping", [rp]))
    hp = rand(16)
    add("helm repo add --password", lambda: (f"helm repo add lab https://charts.lab --username u --password {hp}", [hp]))
    ep = rand(16)
    add("echo | docker login --password-stdin", lambda: (f"echo {ep} | docker login -u ci --password-stdin reg.lab",
                                                          [ep]))
    htp = rand(12)
    add("htpasswd -b", lambda: (f"htpasswd -cb /etc/nginx/.htpasswd alice {htp}", [htp]))
    smb = rand(12)
    add("smbclient -U user%pass", lambda: (f"smbclient //nas/share -U alice%{smb} -c ls", [smb]))
    disk = "S3Z9NB0K" + rand(7, UPPER)
    add("disk serial in a by-id name", lambda: (f"lrwxrwxrwx 1 root root 9 ata-Samsung_SSD_860_EVO_1TB_{disk} -> "
                                                "../../sda", [disk]))
    sn = "S4EWNX0N" + rand(7, UPPER)
    add("NVMe SN line", lambda: (f"Node  SN: {sn}  Model: Samsung SSD 970 EVO Plus 1TB", [sn]))
    gid2 = "".join(RNG.choice("123456789") for _ in range(19))
    add("GCP instance id as JSON", lambda: (f'{{"id": {gid2}, "zone": "projects/1/zones/us-c1-a"}}', [gid2]))
    acct = "".join(RNG.choice("0123456789") for _ in range(12))
    add("AWS account in an ARN", lambda: (f"arn:aws:iam::{acct}:role/ml-runner", [acct]))
    return out


FORMATS = _formats()


def plant(tmp_path: Path, kind: str) -> Path:
    """A copy of a synthetic bundle with every format planted into one capture of `kind`."""
    b = tmp_path / kind
    b.mkdir()
    for p in BASE.iterdir():
        if p.name != "SOURCE.md":
            (b / p.name).write_bytes(p.read_bytes())
    texts = [t for _, t, _ in FORMATS]
    if kind == "text":
        with open(b / "nvidia-smi.txt", "a", encoding="utf-8") as fh:
            fh.write("\n" + "\n".join(texts) + "\n")
    elif kind == "json":
        doc = json.loads((b / "clinfo.json").read_text(encoding="utf-8"))
        doc["notes"] = texts
        (b / "clinfo.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    elif kind == "xml":
        xml = (b / "nvidia-smi-q-x.xml").read_text(encoding="utf-8")
        notes = "".join(f"<note>{xml_escape(t)}</note>\n" for t in texts)
        (b / "nvidia-smi-q-x.xml").write_text(xml.replace("</nvidia_smi_log>", notes + "</nvidia_smi_log>"),
                                              encoding="utf-8")
    elif kind == "env":
        host = json.loads((b / "host.json").read_text(encoding="utf-8"))
        env = host.setdefault("env", {})
        for i, t in enumerate(texts):
            env[f"SOME_SETTING_{i}"] = t
        (b / "host.json").write_text(json.dumps(host, indent=2), encoding="utf-8")
    return b


def forms(value: str) -> List[str]:
    """The value as it can appear in a document: itself, JSON-escaped, XML-escaped."""
    return sorted({value, json.dumps(value)[1:-1], xml_escape(value)})


def test_the_corpus_is_big_enough() -> None:
    assert len(FORMATS) >= 40
    assert all(values for _, _, values in FORMATS)


@pytest.mark.parametrize("kind", ["text", "json", "xml", "env"])
def test_no_planted_value_survives(tmp_path: Path, kind: str) -> None:
    b = plant(tmp_path, kind)
    doc = build_report(ReplayHost(b), ReportOptions(include_raw=True))
    outputs = {"json": json.dumps(doc, ensure_ascii=False), "markdown": markdown(doc)}
    raw = doc["capture_bundle"]["files"]
    assert raw, "the report embeds no captures"
    leaks = []
    for name, _text, values in FORMATS:
        for v in values:
            for where, out in outputs.items():
                if any(f in out for f in forms(v)):
                    leaks.append(f"{name} in {where}: {v[:24]}...")
    assert not leaks, "\n".join(leaks)


def test_the_same_value_gets_the_same_placeholder_everywhere(tmp_path: Path) -> None:
    """A token named as a secret in the environment, and the same token bare in a capture."""
    b = plant(tmp_path, "none")
    token = rand(40)
    host = json.loads((b / "host.json").read_text(encoding="utf-8"))
    host.setdefault("env", {})["MY_SERVICE_TOKEN"] = token
    (b / "host.json").write_text(json.dumps(host), encoding="utf-8")
    with open(b / "nvidia-smi.txt", "a", encoding="utf-8") as fh:
        fh.write(f"\nstarted worker with {token} as its argument\n")
    doc = build_report(ReplayHost(b), ReportOptions(include_raw=True))
    text = json.dumps(doc)
    assert token not in text
    env_ph = json.loads(doc["capture_bundle"]["files"]["host.json"]["text"])["env"]["MY_SERVICE_TOKEN"]
    assert env_ph.startswith("<secret-")
    assert f"started worker with {env_ph} as" in doc["capture_bundle"]["files"]["nvidia-smi.txt"]["text"]
    # the Markdown rendering of the same report: no token, and the same placeholder in both places
    md = markdown(doc)
    assert token not in md
    assert f"started worker with {env_ph} as" in md  # the raw capture
    assert md.count(env_ph) >= 2  # and the environment's value, wherever the Markdown shows it


def test_redacted_report_still_replays_the_same_facts(tmp_path: Path) -> None:
    """The new rules must not eat facts: the report of a planted bundle replays to the same GPUs."""
    b = plant(tmp_path, "text")
    doc = build_report(ReplayHost(b), ReportOptions(include_raw=True))
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    again = build_report(ReplayHost(tmp_path / "r.json"), ReportOptions())
    names = [g["name"] for g in doc["scan"]["gpus"]]
    assert names and [g["name"] for g in again["scan"]["gpus"]] == names
    assert again["scan"]["cpu"]["flags"] == doc["scan"]["cpu"]["flags"]


def test_files_planted_for_none_are_untouched(tmp_path: Path) -> None:
    assert plant(tmp_path, "none").is_dir()
