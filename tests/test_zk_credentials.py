"""The ZooKeeper store's credentials as an operator gives them: ``digest:USER:PASSWORD`` (on the command
line, in the environment or in a file) and the bookies' JAAS file, whose Client section is read as
Java's ConfigFile reads it. What cannot be used is one line naming the file (and line) and what was
expected, never the password."""
from __future__ import annotations

import os
import subprocess

import pytest
from kazoo.security import ACL, CREATOR_ALL_ACL, Id

from bkdisk.metaservice.zk_auth import (
    ZkAuthError,
    ZkCredentials,
    parse_zk_auth,
    read_jaas,
    read_zk_auth_file,
)

SECRET = "pa:ss\"w0rd-NEVER-SHOWN"
PLAIN = "plain-NEVER-SHOWN"
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


def test_digest_form_takes_a_password_holding_colons():
    assert parse_zk_auth("digest:bookie:a:b:c") == ("bookie", "a:b:c")


@pytest.mark.parametrize("text", ["bookie:pw", "digest:bookie", "digest::pw", "digest:bookie:", "sasl:bookie:pw", ""])
def test_a_malformed_digest_form_names_the_form_expected_and_never_the_password(text):
    with pytest.raises(ZkAuthError) as e:
        parse_zk_auth(text)
    assert "expected digest:USER:PASSWORD" in str(e.value)
    assert "pw" not in str(e.value)


def test_the_auth_file_holds_one_line(tmp_path):
    f = tmp_path / "zk-auth"
    f.write_text(f"digest:bookie:{SECRET}\n")
    assert read_zk_auth_file(str(f)) == ("bookie", SECRET)
    f.write_text(f"digest:bookie:{SECRET}\ndigest:other:{SECRET}\n")
    with pytest.raises(ZkAuthError, match="expected one line digest:USER:PASSWORD, found 2 lines") as e:
        read_zk_auth_file(str(f))
    assert SECRET not in str(e.value)
    with pytest.raises(ZkAuthError, match="no-such: cannot read the ZooKeeper credentials"):
        read_zk_auth_file(str(tmp_path / "no-such"))


def test_the_client_section_of_a_bookies_jaas_file(tmp_path):
    f = tmp_path / "jaas.conf"
    f.write_text(f"""
/* ZooKeeper's own section, in the same file on a shared host */
Server {{
   {DIGEST} required
   user_bookie="server-side";
}};
// the section the bookies' ZooKeeper client reads
Client {{
   com.example.AuditLoginModule optional;
   {DIGEST} required
   username="bookie"
   password="pa:ss\\"w0rd-NEVER-SHOWN";
}};
""")
    assert read_jaas(str(f)) == ("bookie", SECRET)


@pytest.mark.parametrize(("text", "message"), [
    ('Server { MODULE required user_bookie="x"; };',
     "no Client section (the one ZooKeeper clients read); sections: Server"),
    ('Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };',
     f"the Client section has com.sun.security.auth.module.Krb5LoginModule, not {DIGEST} "
     "(only SASL DIGEST-MD5 is supported)"),
    ('Client {\n MODULE required\n username="bookie"; };',
     f"line 2: {DIGEST} in Client needs password=\"...\""),
    ('Client {\n MODULE required\n username="bookie"\n password="PW" };',
     f"line 4: expected an option name or ';' in {DIGEST}'s entry"),
    ('Client {\n MODULE mandatory password="PW"; };',
     "line 2: expected a control flag (required, requisite, sufficient, optional)"),
    ('Client {\n MODULE required password="PW;\n};',
     "line 2: not JAAS login configuration syntax"),
    ('Client {\n MODULE required username="bookie" password="PW";\n',
     "the file ends where '}' closing the section Client was expected"),
    ("", "no Client section (the one ZooKeeper clients read); sections: none"),
])
def test_a_jaas_file_that_cannot_be_used_is_one_line_naming_file_line_and_expectation(tmp_path, text, message):
    f = tmp_path / "jaas.conf"
    f.write_text(text.replace("MODULE", DIGEST).replace("PW", PLAIN))
    with pytest.raises(ZkAuthError) as e:
        read_jaas(str(f))
    got = str(e.value)
    assert got.startswith(f"{f}") and message in got and "\n" not in got, got
    assert "NEVER-SHOWN" not in got


def test_an_unreadable_jaas_file_is_one_line(tmp_path):
    with pytest.raises(ZkAuthError, match="nope.conf: cannot read the JAAS file: No such file or directory"):
        read_jaas(str(tmp_path / "nope.conf"))
    (tmp_path / "bin.conf").write_bytes(b"\xff\xfe Client")
    with pytest.raises(ZkAuthError, match="bin.conf: cannot read the JAAS file: UnicodeDecodeError"):
        read_jaas(str(tmp_path / "bin.conf"))


def test_credentials_give_kazoo_the_identity_and_creator_all_and_never_show_the_password():
    both = ZkCredentials(digest=("bookie", SECRET), sasl=("bookie", SECRET))
    kw = both.kazoo_options()
    assert kw["default_acl"] == CREATOR_ALL_ACL == [ACL(31, Id("auth", ""))]
    assert kw["auth_data"] == [("digest", f"bookie:{SECRET}")]
    assert kw["sasl_options"] == {"mechanism": "DIGEST-MD5", "username": "bookie", "password": SECRET}
    assert "sasl_options" not in ZkCredentials(digest=("u", "p")).kazoo_options()
    assert "auth_data" not in ZkCredentials(sasl=("u", "p")).kazoo_options()
    for shown in (repr(both), str(both), both.describe()):
        assert SECRET not in shown and "bookie" in shown
    with pytest.raises(ValueError):
        ZkCredentials()


# --- as `bkdisk metadata serve` takes them: checked before any store is opened ---
@pytest.mark.parametrize(("args", "env", "words"), [
    (["--store", "zk://127.0.0.1:1/ledgers", "--zk-auth", f"digest:bookie{PLAIN}"], None,
     ["Invalid value for --zk-auth: expected digest:USER:PASSWORD"]),
    (["--store", "zk://127.0.0.1:1/ledgers"], f"bookie:{PLAIN}",
     ["Invalid value for --zk-auth: expected digest:USER:PASSWORD"]),
    (["--store", "sqlite:SQLITE", "--zk-auth", f"digest:bookie:{PLAIN}"], None,
     ["--zk-auth, --zk-auth-file and --zk-jaas apply to a zk:// store only"]),
    (["--store", "zk://127.0.0.1:1/ledgers", "--zk-auth", f"digest:bookie:{PLAIN}", "--zk-auth-file", "AUTHFILE"],
     None, ["--zk-auth and --zk-auth-file: give one of them"]),
])
def test_serve_refuses_unusable_zookeeper_options_as_usage_without_the_password(tmp_path, args, env, words):
    from test_metadata_cli import BKDISK
    (tmp_path / "auth").write_text(f"digest:bookie:{PLAIN}\n")
    args = [a.replace("SQLITE", str(tmp_path / "m.db")).replace("AUTHFILE", str(tmp_path / "auth")) for a in args]
    environ = {k: v for k, v in os.environ.items() if k != "BKDISK_ZK_AUTH"}
    if env is not None:
        environ["BKDISK_ZK_AUTH"] = env
    out = subprocess.run([*BKDISK, "metadata", "serve", *args], capture_output=True, text=True, timeout=120,
                         env=environ)
    assert out.returncode == 16, out.stderr
    for w in words:
        assert w in out.stderr, (w, out.stderr)
    assert "NEVER-SHOWN" not in out.stderr + out.stdout


def test_serve_with_an_unusable_jaas_file_is_one_line_exit_8(tmp_path):
    from test_metadata_cli import _one_line, bkdisk
    jaas = tmp_path / "bookie_jaas.conf"
    jaas.write_text('Client { com.sun.security.auth.module.Krb5LoginModule required keyTab="/k"; };\n')
    out = bkdisk("metadata", "serve", "--store", "zk://127.0.0.1:1/ledgers", "--zk-jaas", str(jaas), check=None)
    _one_line(out, 8, f"{jaas}: the Client section has com.sun.security.auth.module.Krb5LoginModule")
    (tmp_path / "auth").write_text("\n")
    out = bkdisk("metadata", "serve", "--store", "zk://127.0.0.1:1/ledgers", "--zk-auth-file",
                 str(tmp_path / "auth"), check=None)
    _one_line(out, 8, f"{tmp_path / 'auth'}: expected one line digest:USER:PASSWORD, found 0 lines")
