"""What the redactor looks for: kinds, regular expressions, and the pure helpers that read
values out of text, JSON and CSV (no state; the Redactor in redact.py keeps the mapping)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from ..model.jsontypes import JsonValue

# kind -> what it stands for (listed in the report's `redactions`).
KINDS: Dict[str, str] = {
    "secret": "environment or configuration values that look like tokens, keys or passwords",
    "host": "host and computer names",
    "user": "user names",
    "home": "home directories",
    "path": "other per-user paths",
    "ip": "IPv4 and IPv6 addresses",
    "mac": "MAC addresses",
    "gpu-uuid": "GPU and MIG UUIDs and other per-GPU unique ids (NVIDIA GPU-..., PDI, AMD unique ids)",
    "uuid": "other UUIDs and GUIDs",
    "serial": "serial numbers and board ids",
    "machine-id": "machine ids, cloud instance ids (AWS i-..., GCP and Azure instance ids), container ids and disk WWNs",
    "product-id": "Windows product ids and keys",
    "email": "e-mail addresses",
}

# Values that carry no information and are never replaced.
NULL_VALUES = frozenset(
    (
        "|n/a|na|none|null|0|0x0|00000000|unknown|not specified|not available|not supported|"
        "default string|to be filled by o.e.m.|system serial number|[n/a]|redacted|xx|-|"
        "not applicable|(none)|gpu-xx|cpu-xx|0000000000000000"
    ).split("|")
)
# Names that are replaced only where their context says they are a name, never as a bare word
# (as a bare word they are too often something else).
GENERIC_NAMES = frozenset(
    (
        "localhost localhost.localdomain user users admin administrator root ubuntu debian fedora "
        "pi raspberrypi nvidia jetson test guest default host home me you name username hostname"
    ).split()
)
# Folder names under /home, /Users, C:\Users that are not a person.
NOT_USERS = frozenset(
    (
        "shared|public|default|default user|all users|defaultapppool|desktop.ini|$user|%username%|"
        "<user>|...|*|~"
    ).split("|")
)

# System accounts and groups (the base-passwd, systemd and distribution defaults, macOS's `_name`
# accounts): who owns a device node (root, render, video) is what a replay needs to see, and no
# person's name. `id` output adds every name whose number is a system one (SYSTEM_ID_MAX).
SYSTEM_ACCOUNTS = frozenset((
    "root daemon bin sys sync games man lp mail news uucp proxy www-data backup list irc gnats nobody nogroup "
    "nfsnobody adm tty disk kmem dialout fax voice cdrom floppy tape sudo wheel audio dip video plugdev render "
    "input kvm sgx staff users utmp shadow crontab netdev lxd docker messagebus syslog uuidd tcpdump sshd ntp "
    "chrony polkitd rtkit avahi colord geoclue pulse pulse-access saned lightdm gdm sddm operator halt shutdown "
    "ftp dbus apache nginx postfix mysql postgres redis _apt systemd-journal systemd-network systemd-resolve "
    "systemd-timesync systemd-coredump sambashare lpadmin scanner bluetooth wireshark libvirt libvirt-qemu "
    "everyone admin localaccounts _developer _lpadmin"
).split())
# An account or group number below this is a system one on every system mlprobe reads (Linux
# reserves < 1000, macOS < 500 and gives people 501 and up); 65534 is nobody/nogroup.
SYSTEM_ID_MAX = 500
NOBODY_IDS = frozenset((65534, 4294967294))
# the home folders of system accounts (root's on Linux and macOS, nobody's): kept as they are
SYSTEM_HOMES = frozenset(("/root", "/var/root", "/nonexistent", "/var/empty"))
# `uid=0(root) gid=0(root) groups=0(root),44(video)`: a number and its name
ID_NAME = re.compile(r"(?<![\w-])(\d{1,10})\(([A-Za-z_][\w.-]{0,31}\$?)\)")


def is_system_account(name: str) -> bool:
    low = name.strip().lower()
    return low in SYSTEM_ACCOUNTS or low.startswith(("systemd-", "_"))


def system_names(text: str) -> List[str]:
    """The names `id` output shows with a system number (`44(video)`, `123(ollama-svc)`), lowercase."""
    return [m.group(2).lower() for m in ID_NAME.finditer(text)
            if int(m.group(1)) < SYSTEM_ID_MAX or int(m.group(1)) in NOBODY_IDS]


_SECRET_WORDS = frozenset(
    (
        "token secret password passwd passphrase apikey credential credentials auth pat privatekey accesskey "
        "pwd sshpass"
    ).split()
)
_HOST_KEYS = frozenset(
    (
        "hostname host_name nodename node_name computername computer_name machinename machine_name "
        "systemname system_name servername pscomputername csname"
    ).split()
)
_USER_KEYS = {"username", "user_name", "user", "logname", "login", "owner"}

# host.json env entries that are settings (read by probes and rules), never secrets.

_ANSI = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
_VENV = r"(?:\([^)\n]{1,60}\)[ \t]*)?"
_U = r"[A-Za-z_][\w.-]{0,31}"
_H = r"[A-Za-z0-9][\w.-]{0,62}"

PROMPTS = [
    # user@host:~/dir$   (base) user@host:/x#
    re.compile(
        rf"(?m)^[ \t]*{_ANSI}{_VENV}{_ANSI}(?P<user>{_U})@(?P<host>{_H}){_ANSI}:"
        rf"{_ANSI}[^\s$#]*{_ANSI}[ \t]?[$#]"
    ),
    # [user@host dir]$
    re.compile(rf"(?m)^[ \t]*{_ANSI}{_VENV}\[(?P<user>{_U})@(?P<host>{_H})[ \t][^\]\n]*\][ \t]?[$#]"),
    # user@host dir %   (zsh on macOS)
    re.compile(rf"(?m)^[ \t]*{_ANSI}{_VENV}(?P<user>{_U})@(?P<host>{_H})[ \t]+\S+[ \t]+[%$#](?:[ \t]|$)"),
]
# (user@host) as kernels and NVIDIA modules record their builder.
BUILDER = re.compile(rf"\((?P<user>{_U})@(?P<host>{_H})\)")
UNAME = re.compile(
    r"(?m)^[ \t]*(?:Linux|Darwin|FreeBSD|OpenBSD|NetBSD|SunOS|(?:MINGW|MSYS|CYGWIN)[\w.-]*)"
    r"[ \t]+(?!version\b)(?!\d+\.\d)(?P<host>[^\s]+)[ \t]+\d"
)
HOST_KV = re.compile(
    r"(?im)^[ \t]*(?:kern\.hostname|host[ _-]?name|machine[ _-]?name|computer[ _-]?name|"
    r"node[ _-]?name|system[ _-]?name|cs[ _-]?name|pscomputername|server[ _-]?name)"
    r"[ \t]*[:=][ \t]*\"?(?P<host>[^\"\r\n]*?)\"?[ \t\r]*$"
)
USER_KV = re.compile(
    r"(?im)^[ \t]*(?:user[ _-]?name|user|logname|login)[ \t]*[:=][ \t]*\"?"
    r"(?P<user>[^\"\r\n]*?)\"?[ \t\r]*$"
)
POSIX_HOME = re.compile(
    r"/(?:private/)?(?:home|Users|var/home|export/home|usr/home|mnt/[a-zA-Z]/Users|[a-zA-Z]/Users|"
    r"run/media)/(?:(?P<user1>[^/\s\"'\\:;,()<>\[\]|*?=][^/\n\"'\\:;,()<>\[\]|*?=]{0,38}?[^/\s\"'\\:;,()<>\[\]|*?=])(?=/|\"|'|\Z)|(?P<user2>[^/\s\"'\\:;,()<>\[\]|*?=]+))"
)
WIN_HOME = re.compile(
    r"(?i)\\{1,2}(?:Users|Documents and Settings|home)\\{1,2}"
    r"(?:(?P<user1>[^\\/\s\"'<>|:*?][^\\/\n\"'<>|:*?]{0,38}?[^\\/\s\"'<>|:*?])(?=\\|\"|'|\Z)|(?P<user2>[^\\/\s\"'<>|:*?,;()\[\]]+))"
)
MAC_TMP = re.compile(r"/(?:private/)?var/folders/(?P<v>[\w+-]{1,4}/[\w+-]{6,})")

SECRET_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_])(?P<name>[A-Z][A-Z0-9_]*)[ \t]*[=:][ \t]*(?P<q>[\"']?)"
    r"(?P<v>[^\s\"',;]+)"
)
TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|"
    r"sk-[A-Za-z0-9_-]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|"
    r"glpat-[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}|"
    r"npm_[A-Za-z0-9]{36}|[sr]k_(?:live|test)_[A-Za-z0-9]{20,}|pypi-AgE[A-Za-z0-9_-]{50,}|"
    r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|dop_v1_[a-f0-9]{64}|dapi[a-f0-9]{32}|"
    r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|AKCp[A-Za-z0-9]{60,}|"
    r"hooks\.slack\.com/services/[A-Za-z0-9/]{20,})"
)
# Assignments whose name holds a strong secret word, in any case and any common syntax: a credentials
# file (`aws_secret_access_key = ...`), YAML (`password: ...`), shell (`export DB_PASSWORD='a b'`),
# JSON-ish text (`"client_secret": "..."`), .npmrc (`//host/:_authToken=...`). A quoted value runs to
# its closing quote, spaces included.
SECRET_ASSIGN_ANY = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?P<name>auth|(?:[A-Za-z_][A-Za-z0-9_.-]*?)?(?:password|passwd|passphrase|secret|"
    r"token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|auth[_-]?token|_auth)[A-Za-z0-9_.-]*)"
    r"[\"']?[ \t]*(?::=|=|:)[ \t]*"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\r\n]{1,400})(?P=q)|(?P<v>[^\s\"',;<>]{1,400}))"
)
# `Authorization: Basic ...`, `Proxy-Authorization: Bearer ...`, `X-API-Key: ...`, `-H "Authorization: token ..."`
AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:basic|bearer|token|digest|negotiate|apikey|api-key|key)[ \t]+)?(?P<v>[^\s\"',;<>]{4,})"
    r"|(?<![A-Za-z0-9-])x-(?:api|auth)-(?:key|token)[\"']?[ \t]*[:=][ \t]*[\"']?(?P<v2>[^\s\"',;<>]{4,})"
)
# PEM / OpenSSH / PGP private keys: the body between the markers (to the end when the paste is cut).
PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?P<body>.*?)"
    r"(?=-----END (?P=kind)-----|\Z)", re.S
)
# .netrc: `machine HOST login USER password SECRET`
NETRC = re.compile(r"(?im)\b(?:login|machine)\b[^\n]*?\b(?:password|passwd)[ \t]+(?P<v>\S+)")

# Cheap substring tests before the costly assignment regex (names are upper case there).
SECRET_HINTS = ("TOKEN", "SECRET", "PASS", "KEY", "AUTH", "CREDENTIAL", "PAT", "PWD")
TOKEN_PREFIXES = tuple(("hf_ ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ sk- xox AKIA AIza glpat- eyJ npm_ k_live_ "
                        "k_test_ pypi-AgE shpat_ shpca_ shppa_ shpss_ dop_v1_ dapi SG. AKCp hooks.slack").split())
# The userinfo of a URL runs to its last '@' before the host (as urllib and pip read it), so a password
# with an '@' in it is taken whole (`user:pass@word@host`); a user alone is a credential too (a token
# given as the user name: `https://TOKEN@host`, `https://oauth2accesstoken@host`).
URL_CRED = re.compile(
    r"(?i)\b[a-z][a-z0-9+.-]*://(?P<cred>[^/\s?#@]+(?:@[^/\s?#@]+)*)@(?=[^/\s?#@]*(?:[/?#\s\"'<>]|$))"
)
# User names in URLs that are a convention, not a credential (`git+ssh://git@github.com/...`).
URL_USERS_NOT_SECRET = frozenset(("git", "anonymous", "ftp", "hg", "svn"))
# Connection strings and signed URLs: Azure storage and Service Bus keys, shared access signatures.
CONN_SECRET = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=(?P<v>[^;\s\"'&<>]{6,})"
)
_ARG_VALUE = r"(?:(?P<q>[\"'])(?P<qv>[^\"'\r\n]{1,400})(?P=q)|(?P<v>[^\s\"']{1,400}))"
# Passwords on command lines: the MySQL/MariaDB clients' `-pSECRET` (glued to -p; `-P` is the port),
# a registry login's `-p`/`--password`, sshpass -p, curl -u user:secret.
CLI_SECRETS = [
    re.compile(r"(?i)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlsh|mysqlpump|"
               rf"mariadb(?:-dump|-admin|-import|-check)?)\b[^\n]*?[ \t](?-i:-p){_ARG_VALUE}"),
    re.compile(r"(?i)\b(?:docker|podman|nerdctl|buildah|skopeo|helm|oras|crane|regctl|singularity|"
               r"apptainer)\b"
               rf"[^\n]*?\blogin\b[^\n]*?[ \t](?:(?-i:-p)|--password)(?:[ \t]+|=){_ARG_VALUE}"),
    re.compile(rf"(?i)\bsshpass\b[^\n]*?[ \t](?-i:-p)[ \t]*{_ARG_VALUE}"),
    # redis-cli -a SECRET / --pass SECRET; any command's --password/--passwd/--pass/--token/--secret VALUE
    re.compile(rf"(?i)\bredis-cli\b[^\n]*?[ \t](?:(?-i:-a)|--pass)(?:[ \t]+|=){_ARG_VALUE}"),
    re.compile(r"(?i)(?<![\w-])--(?:password|passwd|pass|token|secret|api-?key|auth-token|access-token)"
               rf"(?![\w-])(?:[ \t]+|=){_ARG_VALUE}"),
    # Samba and CIFS tools: -U user%SECRET, --user=user%SECRET
    re.compile(r"(?i)\b(?:smbclient|rpcclient|smbcacls|smbget|smbmap|smbtree|net|mount\.cifs|wbinfo)\b[^\n]*?"
               r"[ \t](?:(?-i:-U)|--user(?:name)?)(?:[ \t]*|=)[\"']?[^\s%\"']{1,64}%(?P<v>[^\s\"']{1,400})"),
    # htpasswd -b[...] [FILE] USER SECRET: the password is the command's last word
    re.compile(r"(?i)\bhtpasswd\b(?=[^\n]*?[ \t]-[A-Za-z]*b)(?:[ \t]+\S+){2,}?[ \t]+"
               r"(?:(?P<q>[\"'])(?P<qv>[^\"'\r\n]{1,400})(?P=q)|(?P<v>[^\s\"';|&]{1,400}))[ \t]*(?=$|[;|&#\r\n])"),
    # a secret piped into a login: echo SECRET | docker login --password-stdin
    re.compile(r"(?i)\b(?:echo|printf)(?:[ \t]+-n|[ \t]+[\"']%s[\"'])?[ \t]+"
               r"(?:(?P<q>[\"'])(?P<qv>[^\"'\r\n]{1,400})(?P=q)|(?P<v>[^\s\"'|]{1,400}))[ \t]*\|[^\n]*?--password-stdin"),
    re.compile(r"(?i)\bcurl\b[^\n]*?[ \t](?:(?-i:-u)|--user)(?:[ \t]+|=)[\"']?[^\s:\"'@/]{1,64}:"
               r"(?P<v>[^\s\"']{1,400})"),
]
CLI_HINTS = ("mysql", "mariadb", "login", "sshpass", "curl", "redis-cli", "--pass", "--token", "--secret",
             "--api", "--auth", "--access", "%", "htpasswd", "stdin")
# AWS EC2 instance ids, wherever they appear (i- and 8 or 17 hex digits).
AWS_INSTANCE = re.compile(r"(?<![\w-])i-(?:[0-9a-f]{17}|[0-9a-f]{8})(?![\w-])")
# Docker, Podman, containerd and CRI-O container ids (64 hex digits) where they name a container: in
# /proc/1/cgroup paths (`/docker/ID`, `docker-ID.scope`, `libpod-ID`, `cri-containerd-ID`, `crio-ID`)
# and Podman's /run/.containerenv (`id="ID"`). Image ids (`imageid=`) are public and stay.
CONTAINER_ID = re.compile(r'(?:(?<=/docker/)|(?<=docker-)|(?<=libpod-)|(?<=containerd-)|(?<=crio-)|(?<=^id="))'
                          r"[0-9a-f]{64}(?![0-9a-f])", re.M)
# OpenSSH known_hosts (and authorized_keys with a host pattern): `host1,host2,[host3]:2222 KEYTYPE AAAA...`.
KNOWN_HOSTS = re.compile(
    r"(?m)^[ \t]*(?:@(?:cert-authority|revoked)[ \t]+)?(?P<hosts>[^\s|#@][^\s]*)[ \t]+"
    r"(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com|[\w.-]+-cert-v01@openssh\.com)[ \t]+AAAA"
)

_HEX_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
GPU_UUID = re.compile(rf"(?<![\w-])(?:(?:MIG|GPU)-){{1,2}}(?P<hex>{_HEX_UUID})(?![0-9A-Fa-f])")
AMD_UUID = re.compile(r"(?<![\w-])GPU-(?P<hex>[0-9A-Fa-f]{16})(?![\w-])")
UUID = re.compile(rf"(?<![\w-])(?P<hex>{_HEX_UUID})(?![\w-])")
PRODUCT_ID = re.compile(r"(?<![\w-])(?=[0-9A-Z-]*\d)[0-9A-Z]{5}(?:-[0-9A-Z]{5}){3,4}(?![\w-])")
MAC = re.compile(r"(?<![\w:.-])(?:[0-9A-Fa-f]{2}([:-]))(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![\w:.-])")
IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%[\w.]+)?(?![\w:])")
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][\w.+-]{0,63}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}(?![\w-])"
)
WIN_SID = re.compile(r"(?<![\w-])S-1-5-21(?:-\d{6,10}){3}(?:-\d{3,10})?(?![\w-])")
HEX32 = re.compile(r"(?<![\w-])[0-9a-fA-F]{32}(?![\w-])")
# Four small numbers are as often a version as an address: after `==`, `version:`, `v`, a crash
# signature's `P2:`, or as the second column of a `pip list` row, they are a version.
_VERSION_BEFORE = re.compile(r"(?i)(?:==|~=|>=|<=|!=|version[ \t]*[:=]?|\bver\.?|\bv|\bP\d{1,2}:)[ \t]*$")
# `"version": "`, `'driver_version': '` (a version key in JSON, YAML or a Python repr)
_QUOTED_VERSION_KEY = re.compile(r"(?i)version[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*$")
_VERSION_AFTER = re.compile(r"^(?:[+]\w|-(?:py|cp)\d|\.(?:tar\.gz|whl|zip|dist-info|egg-info)\b)")
_NAME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9._-]*$")
# Python distributions beside the frameworks whose versions appear in pip output and reports.
_PACKAGES = frozenset(
    "numpy scipy pip setuptools wheel packaging protobuf ml-dtypes opt-einsum flatbuffers triton "
    "nvidia-cudnn-cu12 nvidia-cublas-cu12 nvidia-nccl-cu12 cuda-python tensorrt onnx".split()
)
_VERSION_PARENTS = frozenset(("packages", "versions", "installed", "dists", "distributions", "requirements",
                              "pins", "frameworks"))
_PIP_ROW = re.compile(r"^[ \t]*[A-Za-z][A-Za-z0-9._-]*[ \t]+$")
_PIP_TAIL = re.compile(r"^(?:[ \t]+(?:/|[A-Za-z]:\\)\S*)?[ \t]*$")

# "Serial Number : X", "Board ID : 0x2d00", "GPU PDI : 0x...", "Unique ID: 0x...", ...
ID_KV = re.compile(
    r"(?im)(?<![\w.])(?P<key>(?:serial(?:[ \t_]*(?:number|no\.?|#))?|serialnumber|"
    r"board[ \t_]*id|gpu[ \t_]*pdi|unique[ \t_]*id|host[ \t_]*id|fabric[ \t_]*guid|hardware[ \t_]*uuid|"
    r"provisioning[ \t_]*udid|platform[ \t_]*uuid|machine[ \t_]*id|kern\.uuid|kern\.bootsessionuuid|"
    r"id_serial(?:_short)?|id_wwn(?:_with_extension|_vendor_extension)?|id_scsi_serial|"
    r"instance[ \t_/-]?id|vm[ \t_-]?id))"
    r"(?:[ \t]*\([^)\n]*\))?[ \t]*[:=][ \t]*(?P<v>[^\r\n<]*?)[ \t\r]*(?=$|<)"
)
ID_HINTS = ("serial", "board", "pdi", "unique", "host", "fabric", "uuid", "udid", "guid", "machine", "wwn",
            "instance", "vm")
XML_ID = re.compile(
    r"<(?P<tag>[\w]*serial[\w]*|board_id|host_id|gpu_fabric_guid|gpu_pdi|pdi)>"
    r"(?P<v>[^<]*)</(?P=tag)>"
)
KFD_UNIQUE = re.compile(r"(?m)^[ \t]*unique_id[ \t]+(?P<v>\d+)[ \t\r]*$")
# /dev/disk/by-id names: ata-MODEL_SERIAL, nvme-MODEL_SERIAL, usb-VENDOR_MODEL_SERIAL-0:0, scsi-…_SERIAL
# (with -partN), nvme-eui.HEX and wwn-0xHEX: each names one physical disk.
DISK_BY_ID = re.compile(
    r"(?<![\w.-])(?:(?:ata|nvme|scsi|usb|mmc|virtio|ide)-[A-Za-z0-9._-]*?_(?P<v>[A-Za-z0-9][A-Za-z0-9-]{5,}?)"
    r"(?:-\d+:\d+)?|(?:nvme-eui|nvme-nvme|wwn-0x)\.?(?P<v2>[0-9A-Fa-f._-]{8,}?))(?:-part\d+)?(?![\w.:-])"
)
# `SN: S4EWNX0N712345K` (nvme list, smartctl's short form, vendor tools)
SN_LINE = re.compile(r"(?<![\w-])(?:SN|S/N)[ \t]*[:=][ \t]*(?P<v>[A-Za-z0-9][A-Za-z0-9-]{4,})")
# AWS ARNs: the 12-digit account id (arn:aws:ec2:us-east-1:123456789012:instance/i-...)
ARN_ACCOUNT = re.compile(r"\barn:aws[\w-]*:[\w-]*:[\w-]*:(?P<v>\d{12}):")
# a cloud instance's numeric id written as JSON inside text ("id": 4567891234567891234, GCP's metadata)
CLOUD_NUMERIC_ID = re.compile(r'(?i)"(?:id|instance_?id|numeric_?id)"[ \t]*:[ \t]*(?P<v>\d{16,20})(?!\d)')
# ssh_config: `HostName db-primary.prod.internal`
SSH_HOSTNAME = re.compile(r"(?im)^[ \t]*HostName[ \t]+(?P<v>[^\s#]+)")
LSPCI_DSN = re.compile(r"Device Serial Number[ \t]+(?P<v>[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){7})")
LSUSB_SERIAL = re.compile(r"(?m)^[ \t]*iSerial[ \t]+\d+[ \t]+(?P<v>\S[^\r\n]*?)[ \t\r]*$")

_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|[{}\[\]:,]')

Span = Tuple[int, int, str, str]  # start, end, kind, key


def _camel_words(name: str) -> List[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def is_secret_name(name: str) -> bool:
    """HF_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, password, apiKey, ... (not KEYBOARD)."""
    words = _camel_words(name)
    if any(w in _SECRET_WORDS for w in words):
        return True
    joined = "".join(words)
    if any(s in joined for s in ("apikey", "secretkey", "accesskey", "privatekey", "password")):
        return True
    return "key" in words and (name.isupper() or len(words) == 1)


def looks_secret(value: str) -> bool:
    """A long, high-entropy token without spaces or path separators."""
    v = value.strip()
    if len(v) < 16 or re.search(r"[\s/\\]", v):
        return False
    parts = re.split(r"[_.-]", v)
    if len(parts) >= 3 and all(len(p) <= 12 for p in parts):
        return False  # an identifier made of words (metal_amd_radeon_pro_5600m.0), not a token
    classes = sum(bool(re.search(p, v)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    if classes < 2:
        return False
    counts = Counter(v)
    entropy = -sum(c / len(v) * math.log2(c / len(v)) for c in counts.values())
    return entropy >= 3.5


def _line_around(text: str, start: int, end: int) -> Tuple[str, str]:
    head = text.rfind("\n", 0, start) + 1
    tail = text.find("\n", end)
    return text[head:start], text[end : len(text) if tail < 0 else tail].rstrip("\r")


def is_package_name(name: str) -> bool:
    """A Python distribution whose version mlprobe reports (jax, jaxlib, torch, ...)."""
    from ..model.builds import FRAMEWORKS

    norm = re.sub(r"[-_.]+", "-", name.strip().lower())
    return norm in _PACKAGES or norm in FRAMEWORKS


def is_version_key(key: Optional[str], parent: Optional[str] = None) -> bool:
    """A JSON key whose value is a version: `version`, `driver_version`, `jaxlib` (a package), or any
    key of a `packages` / `versions` object."""
    if not key:
        return False
    k = key.lower()
    if "version" in k or k in ("ver", "release") or is_package_name(key):
        return True
    return bool(parent) and (parent or "").lower() in _VERSION_PARENTS


def looks_like_version(text: str, start: int, end: int) -> bool:
    before, after = _line_around(text, start, end)
    if _VERSION_BEFORE.search(before[-32:]) or _QUOTED_VERSION_KEY.search(before[-48:]):
        return True
    if _VERSION_AFTER.match(after):
        return True  # jax-0.12.0.1-py3-none-any.whl, 2.13.0.1+cpu, jax-0.12.0.1.dist-info
    tail = before[-64:].rstrip(" \t\"'(:=/@_-")
    m = _NAME_TAIL.search(tail)
    if m and is_package_name(m.group(0)):
        return True  # jax 0.12.0.1 on cpu, "jaxlib": "0.12.0.1", torch/2.13.0.1, jax (0.12.0.1)
    return bool(_PIP_ROW.match(before) and _PIP_TAIL.match(after))


def is_null(value: str) -> bool:
    """No information: empty, N/A, all zeros, or already a placeholder of ours."""
    v = value.strip().strip("{}[]").strip().lower()
    if v in NULL_VALUES or v.startswith("redacted") or (v.startswith("<") and v.endswith(">")):
        return True
    core = re.sub(r"^(?:(?:gpu|mig)-)+|^0x|[-:]", "", v)
    return core == "" or set(core) <= {"0"} or bool(re.fullmatch(r"0{10,}[0-9a-f]{1,6}", core))


_CSV_HINTS = tuple(
    (
        "serial uuid guid udid unique board pdi host user login owner node computer machine system "
        "server token secret pass key auth credential"
    ).split()
)
_CSV_FIELD = re.compile(r"[A-Za-z_][\w.]*(?: \[[^\]]*\])?")


def csv_cells(text: str) -> Iterator[Tuple[int, int, str, str]]:
    """Cells of comma-separated tables (nvidia-smi --query-gpu ... --format=csv) whose column
    names say they hold an identity (serial, uuid, hostname, ...): (start, end, hint, value)."""
    hints: Optional[List[Optional[str]]] = None
    pos = 0
    low = text.lower()
    if "," not in text or not any(k in low for k in _CSV_HINTS):
        return
    for line in text.splitlines(keepends=True):
        start, body = pos, line.rstrip("\r\n")
        pos += len(line)
        fields = body.split(",")
        if len(fields) >= 2 and all(_CSV_FIELD.fullmatch(f.strip()) for f in fields):
            names = [f.strip().split(" [")[0] for f in fields]
            cols = [key_hint(n.split(".")[-1]) or key_hint(n.replace(".", "_")) for n in names]
            hints = cols if any(cols) else None
            continue
        if hints is None:
            continue
        if len(fields) != len(hints):
            hints = None if not body.strip() else hints
            continue
        off = start
        for hint, cell in zip(hints, fields):
            value = cell.strip()
            if hint and value and not is_null(value):
                lead = len(cell) - len(cell.lstrip())
                yield off + lead, off + lead + len(value), hint, value
            off += len(cell) + 1


def protected_values(scan_report: Mapping[str, JsonValue]) -> List[str]:
    """The strings of a scan report's JSON (what the redactor reads) that a replay must reproduce
    exactly (facts, not identities): everything except ids, serials, interpreter and package paths,
    probe errors and the source."""
    skip = {"uuid", "serial", "executable", "location", "source", "probes", "env", "error"}
    out: List[str] = []

    def walk(obj: JsonValue, key: Optional[str]) -> None:
        if key in skip:
            return
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, str(k))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, key)
        elif isinstance(obj, str):
            if "/" in obj or "\\" in obj:  # paths name users; they are redacted by context
                return
            out.append(obj)

    for k, v in scan_report.items():
        if k not in ("source", "probes"):
            walk(v, k)
    return out


# Windows tools write UTF-16 or the ANSI code page of a localised Windows (a Chinese dxdiag is
# cp936): their captures are decoded as the Windows probe reads them, so that the text a report
# embeds replays to the same facts.
WINDOWS_TEXT = frozenset({"dxdiag.txt", "Win32_VideoController.txt", "Win32_Processor.txt"})


def text_of(data: bytes, name: str = "") -> Tuple[str, bool]:
    """Bytes -> text, keeping line ends. The flag says whether the bytes were exact UTF-8."""
    if name in WINDOWS_TEXT:
        try:
            return data.decode("utf-8"), True
        except UnicodeDecodeError:
            from ..probes.windows import decode_windows_text

            return decode_windows_text(data, keep_line_ends=True), False
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace"), False
    try:
        text = data.decode("utf-8")
        return text, True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def mode_for(name: str) -> str:
    low = name.lower()
    if low.endswith(".json"):
        return "json"
    if low.endswith(".xml"):
        return "xml"
    return "text"


def key_hint(key: Optional[str], parent: Optional[str] = None) -> Optional[str]:
    if not key:
        return None
    if key == "owner" and parent == "libraries":
        return None  # loaded-libraries.json: the distribution that owns a library file, not a person
    if is_secret_name(key):
        return "secret"
    k = re.sub(r"[^a-z0-9]+", "_", "_".join(_camel_words(key)))
    if "serial" in k:
        return "serial"
    if k in ("unique_id", "board_id", "pdi", "gpu_pdi", "host_id", "gpu_fabric_guid"):
        return "serial"
    if k in ("machine_id", "hardware_uuid", "platform_uuid", "provisioning_udid", "instance_id", "vm_id",
             "instanceid", "vmid", "id_wwn", "id_wwn_with_extension"):
        return "machine-id"
    if k.endswith(("uuid", "guid", "udid")):
        return "uuid"
    if k.replace("_", "") in {h.replace("_", "") for h in _HOST_KEYS}:
        return "host"
    if k.replace("_", "") in {u.replace("_", "") for u in _USER_KEYS}:
        return "user"
    return None


_NV_SHAPE = re.compile(rf"((?:(?:MIG|GPU)-){{1,2}}){_HEX_UUID}", re.I)


def shaped(placeholder: str, kind: str, original: str) -> str:
    """GPU ids and serial numbers keep the shape their parsers check (so a replay reads them as
    ids again), in a form no real device has: GPU-00000000-0000-0000-0000-000000000001,
    GPU-0000000000000001, 0x0000000000000001, REDACTED-SERIAL-1. Everything else is `<kind-N>`."""
    n = int(placeholder.rsplit("-", 1)[1].rstrip(">"))
    o = original.strip()
    if kind == "gpu-uuid":
        m = _NV_SHAPE.fullmatch(o)
        if m:
            return f"{m.group(1)}00000000-0000-0000-0000-{n:012x}"
        if re.fullmatch(r"GPU-[0-9A-Fa-f]{16}", o):
            return f"GPU-{n:016x}"
        if re.fullmatch(r"0x[0-9A-Fa-f]{1,16}", o):
            return f"0x{n:016x}"
        if re.fullmatch(r"\d+", o):
            return str(n)
    if kind == "serial":
        return f"REDACTED-SERIAL-{n}"
    return placeholder


def classify_id(hint: str, value: str) -> Tuple[str, str]:
    v = value.strip().strip("{}")
    m = re.fullmatch(rf"(?:(?:MIG|GPU)-){{1,2}}({_HEX_UUID})", v, re.I)
    if m:
        return "gpu-uuid", m.group(1).lower().replace("-", "")
    m = re.fullmatch(r"(?:GPU-|0x)([0-9A-Fa-f]{16})", v)
    if m:
        return "gpu-uuid", "amd:%x" % int(m.group(1), 16)
    if re.fullmatch(_HEX_UUID, v):
        return ("machine-id" if hint == "machine-id" else "uuid"), v.lower()
    return ("machine-id" if hint == "machine-id" else "serial"), v.lower()


def json_walk(text: str) -> Iterator[Tuple[str, int, int, Optional[str], Optional[str]]]:
    """JSON tokens that carry data, with the key they belong to and their container's key.
    Yields (kind, start, end, key, parent) with kind "key", "str" or "num". Works on truncated
    or slightly broken JSON: whatever is not a token is left to the caller's plain-text pass."""
    stack: List[Tuple[str, Optional[str]]] = []  # (container, key of the container)
    pending: Optional[str] = None
    expect_key = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in "{[":
            stack.append(
                (tok, pending if stack and stack[-1][0] == "{" else (stack[-1][1] if stack else None))
            )
            expect_key = tok == "{"
            pending = None
            continue
        if tok in "}]":
            if stack:
                stack.pop()
            expect_key = False
            continue
        if tok == ",":
            expect_key = bool(stack) and stack[-1][0] == "{"
            if expect_key:
                pending = None
            continue
        if tok == ":":
            expect_key = False
            continue
        in_obj = bool(stack) and stack[-1][0] == "{"
        parent = stack[-1][1] if stack else None
        if tok.startswith('"') and in_obj and expect_key:
            pending = json_string(tok)
            yield "key", m.start(), m.end(), None, parent
            continue
        if in_obj:
            key, outer = pending, parent
        else:
            key, outer = parent, (stack[-2][1] if len(stack) >= 2 else None)
        yield ("str" if tok.startswith('"') else "num"), m.start(), m.end(), key, outer


def json_string(literal: str) -> Optional[str]:
    try:
        value = json.loads(literal, strict=False)  # control characters in a pasted capture
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def json_strings(text: str) -> Iterator[Tuple[Optional[str], str, Optional[str]]]:
    for kind, s, e, key, parent in json_walk(text):
        if kind == "str":
            v = json_string(text[s:e])
            if v is not None:
                yield key, v, parent
