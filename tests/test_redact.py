"""Secret masking: what must be masked, what must be left alone, and that every output format is masked."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.model import Report, Status
from dfdoctor.redact import MASK, Redactor, name_looks_secret
from dfdoctor.render import FORMATS

from support.html_samples import failed_launch
from support.in_process import run_here

CI_FORMATS = ("github", "sarif", "gitlab", "github step summary")  # findings only, no captured output

HF = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm0123456789"
PW = 'p@ss w0rd"\\!'
ENV = {"HF_TOKEN": HF, "PGPASSWORD": PW, "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
       "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "HOME": "/root", "PWD": "/workspace",
       "HF_HUB_DISABLE_TELEMETRY": "1", "MY_SERVICE_TOKEN": "on", "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1"}
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
       "QyNTUxOQAAACDxEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEAAAA\n-----END OPENSSH PRIVATE KEY-----\n")


@pytest.fixture
def red() -> Redactor:
    return Redactor.from_env(ENV)


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "PGPASSWORD", "MYSQL_PWD", "DB_PASS", "GITHUB_TOKEN", "OPENAI_API_KEY",
                                  "NPM_AUTH", "SENTRY_DSN", "githubToken", "client-secret", "GOOGLE_CREDENTIALS",
                                  "SSH_PRIVATE_KEY", "COOKIE"])
def test_secret_names(name: str) -> None:
    assert name_looks_secret(name)


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "HOME", "PATH", "CUDA_VISIBLE_DEVICES", "SSH_AUTH_SOCK",
                                  "TOKENIZERS_PARALLELISM", "KEYBOARD", "MONKEY_PATCH", "BYPASS_CACHE",
                                  "COMPASS", "HF_TOKEN_PATH", "GOOGLE_APPLICATION_CREDENTIALS_FILE", "MAX_TOKENS"])
def test_ordinary_names(name: str) -> None:
    assert not name_looks_secret(name)


def test_env_values_masked_wherever_they_appear(red: Redactor) -> None:
    stderr = (f"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
              f"    login(token='{HF}')\nValueError: invalid token {HF}\n"
              f"connecting with {PW} as password\nusing key {ENV['WANDB_API_KEY']}.\n")
    out = red.text(stderr)
    for secret in (HF, PW, ENV["WANDB_API_KEY"]):
        assert secret not in out
    assert "ValueError: invalid token ***" in out
    assert 'File "train.py", line 3' in out  # the rest of the traceback stays readable


def test_encoded_forms_of_a_secret_are_masked(red: Redactor) -> None:
    from urllib.parse import quote
    assert quote(PW, safe="") not in red.text(f"dsn=host?x={quote(PW, safe='')}")
    assert json.dumps(PW)[1:-1] not in red.text(json.dumps({"value": PW}))


def test_non_secret_and_trivial_values_untouched(red: Redactor) -> None:
    text = "cwd /workspace home /root, step 1 of 10, retries on, agent /tmp/ssh-XXXX/agent.1"
    assert red.text(text) == text


@pytest.mark.parametrize("text,secret", [
    ("postgres://bob:hunter2hunter2@db.internal:5432/train", "hunter2hunter2"),
    ("git clone https://oauth2:glsecret123@gitlab.example.com/x.git", "glsecret123"),
    ("redis://:justapassword@cache:6379/0", "justapassword"),
    ("Authorization: Bearer abcdef0123456789abcdef", "abcdef0123456789abcdef"),
    ("curl -H 'Authorization: token 12345678abcdefgh'", "12345678abcdefgh"),
    ("export WANDB_API_KEY=abcd1234efgh", "abcd1234efgh"),
    ("MY_SECRET: s3cr3t-value", "s3cr3t-value"),
    ('{"password": "two words"}', "two words"),
    ("{'api_key': 'k-123456'}", "k-123456"),
    ("python train.py --hf-token tok123456 --lr 3e-4", "tok123456"),
    ("python train.py --password=pw123456", "pw123456"),
    ("connect password=correct_horse_battery user=bob", "correct_horse"),
    ("python train.py --db-password=correct_horse_battery", "correct_horse"),
    ("https://bucket.s3.amazonaws.com/x?X-Amz-Signature=deadbeefcafe&token=tk99999", "deadbeefcafe"),
    ("ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2C3d4"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11ABCDEFG"),
    ("hf_" + "a" * 34, "hf_aaaa"),
    ("sk-proj-" + "x" * 40, "sk-proj-xxxx"),
    ("sk-ant-api03-" + "y" * 40, "sk-ant-api03-yyyy"),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("xoxb-123456789012-abcdefABCDEF", "xoxb-123456789012"),
    ("AIza" + "B" * 35, "AIzaBBBB"),
    ("glpat-" + "c" * 20, "glpat-cccc"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJhbGci"),
    (PEM, "b3BlbnNzaC1rZXktdjEAAAA"),
])
def test_patterns_masked_without_env(text: str, secret: str) -> None:
    out = Redactor({}).text(text)
    assert secret not in out
    assert MASK in out


def test_private_key_block_keeps_armour_and_masks_cut_off_block() -> None:
    out = Redactor().text("before\n" + PEM + "after")
    assert out.startswith("before\n-----BEGIN OPENSSH PRIVATE KEY----- *** -----END OPENSSH PRIVATE KEY-----")
    assert out.endswith("after")
    cut = Redactor().text("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\n[... trimmed]")
    assert "MIIEow" not in cut and "trimmed" not in cut


@pytest.mark.parametrize("text", [
    "KeyError: 'token'", "Authentication: failed for user bob", "tokens/s 18233, passed 12 tests",
    "commit 3f2a9c1e0b7d4a6f8e5c2b1a0d9e8f7c6b5a4d3e", "see https://example.com/a:b@c",
    "monkeypatch the keyboard", "torch.compile(model, mode='max-autotune')", "x: 1, y: 2",
    "    best = sorted(rows, key=lambda r: r.rank)", "if key in cache: pass",
    "    cache_key = get_cache_key()", "    CompileEventLogger.pt2_compile(name, cache_key=cache_key)",
    "    fn_key = fn.forward if isinstance(fn, torch.nn.Module) else fn", "token = 0",
    "    self._credentials_to_save = None", "    orig_sig = inspect.signature(func)",
    "    db: ExactWeakKeyDictionary = ExactWeakKeyDictionary()", "    fn_signature = f\"{args}\"",
    "    self.module_cache_key = module_cache_key", "    username, password = url_user_password",
    "    self.secret = secret", '    password = ""',
])
def test_ordinary_text_left_alone(text: str) -> None:
    assert Redactor({}).text(text) == text


def test_argv_value_after_secret_option() -> None:
    argv = ["python", "train.py", "--wandb-key", "abc12345", "--token=zz998877", "--epochs", "3"]
    assert Redactor({}).argv(argv) == ["python", "train.py", "--wandb-key", MASK, "--token=***", "--epochs", "3"]


def test_env_dump_masks_secret_names_even_short_values(red: Redactor) -> None:
    dumped = red.env({"HF_TOKEN": "abc", "HOME": "/root", "NOTE": f"uses {HF}"})
    assert dumped == {"HF_TOKEN": MASK, "HOME": "/root", "NOTE": "uses ***"}


def test_report_masked_copy_everywhere(red: Redactor) -> None:
    rep = failed_launch(stderr_extra=f"HF_TOKEN={HF}\nurl https://u:{PW}@host/x\n")
    rep.command += ["--hf-token", HF]
    rep.verdict.evidence.append(f"token in use: {HF}")
    rep.checks[0].data["environment"] = {"HF_TOKEN": HF, "PGPASSWORD": PW}
    rep.checks[0].findings = []
    rep.timeline.append({"t": 1.0, "event": "env", "detail": f"PGPASSWORD={PW}"})
    rep.run["env"] = {"WANDB_API_KEY": ENV["WANDB_API_KEY"]}
    before = json.dumps(rep.to_dict())
    masked = red.report(rep)
    assert json.dumps(rep.to_dict()) == before, "the original report must not change"
    doc = json.dumps(masked.to_dict(), ensure_ascii=False)
    for secret in (HF, PW, ENV["WANDB_API_KEY"], json.dumps(PW)[1:-1]):
        assert secret not in doc
    assert isinstance(masked, Report) and masked.verdict.cause == rep.verdict.cause
    assert "ModuleNotFoundError: No module named 'flash_attn'" in masked.checks[5].output


def test_report_learns_secrets_from_the_report_itself() -> None:
    """A job's environment (e.g. from a remote target's run record) names secrets dfdoctor's env never had."""
    rep = failed_launch(stderr_extra="ValueError: bad credentials remote-only-Secret-77\n")
    rep.run["environment"] = {"REMOTE_API_TOKEN": "remote-only-Secret-77"}
    doc = json.dumps(Redactor.from_env({}).report(rep).to_dict())
    assert "remote-only-Secret-77" not in doc


def test_every_output_format_is_masked(tmp_path: Path) -> None:
    """The lead's emit() masks before rendering: text, json, junit and html all come out clean."""
    from dfdoctor import engine
    rep = failed_launch(stderr_extra=f"login failed for {HF}\n-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n"
                                     f"-----END RSA PRIVATE KEY-----\npostgres://a:{PW}@db/x\n")
    rep.checks[5].details = f"HF_TOKEN={HF}"
    problem = next(c for c in rep.checks if c.status.rank >= Status.WARN.rank)  # what the CI formats carry
    problem.summary += f" (token {HF})"
    problem.fix = f"export HF_TOKEN={HF} and retry"
    rep.verdict.fix = f"curl -H 'Authorization: Bearer {HF}' https://x and postgres://a:{PW}@db/x"
    summary = tmp_path / "step-summary.md"
    outs = {fmt: tmp_path / f"out.{fmt}" for fmt in FORMATS}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITHUB_STEP_SUMMARY", str(summary))
        engine.emit(rep, [(f, str(p)) for f, p in outs.items()], verbose=True, env=ENV)
    outs["github step summary"] = summary
    for fmt, path in outs.items():
        body = path.read_text()
        # the report itself is there (the CI formats carry the findings, not the captured output)...
        assert "flash_attn" in body or (fmt in CI_FORMATS and "and retry" in body), fmt
        for secret in (HF, "MIIEsecret", "p@ss w0rd"):
            assert secret not in body, f"{secret!r} leaked into {fmt}"


def test_cli_report_masks_saved_results(tmp_path: Path, dfdoctor) -> None:
    """`dfdoctor report RESULT.json` re-renders saved results with the current environment's secrets masked. The
    first format through the console script (the secret reaches it in its environment), the others through the same
    entry in this process (support/in_process), with that environment: 1 process, not 7."""
    rep = failed_launch(stderr_extra=f"echo $HF_TOKEN -> {HF}\n")
    saved = tmp_path / "result.json"
    saved.write_text(json.dumps(rep.to_dict()))
    for fmt in FORMATS:
        out = tmp_path / f"again.{fmt}"
        res = (dfdoctor if fmt == FORMATS[0] else run_here)("report", str(saved), "--format", fmt, "--output",
                                                            str(out), env={"HF_TOKEN": HF})
        assert res.returncode == 1, res.stderr  # a failed launch stays a failure
        body = out.read_text()
        assert HF not in body, fmt
        if fmt in ("json", "html", "junit"):  # text shows captured output only with -v; CI formats, findings
            assert "echo $HF_TOKEN -> ***" in body.replace("&gt;", ">"), fmt


def test_one_mib_of_output_is_masked_quickly(red: Redactor) -> None:
    rep = failed_launch(stderr_extra=("step 1 loss 2.31 lr 3e-4 tok/s 18000 token " + HF + "\n") * 16000)
    assert len(rep.checks[5].output) > 1_000_000
    t = time.perf_counter()
    masked = red.report(rep)
    took = time.perf_counter() - t
    assert HF not in masked.checks[5].output
    assert took < 10, f"masking 1 MiB took {took:.1f} s"
    print(f"masked 1 MiB report in {took:.2f} s")


def test_redact_is_stdlib_only() -> None:
    """The recorder imports its rules under any interpreter: nothing outside the standard library at import time."""
    import ast
    src = (Path(__file__).parent.parent / "doctor" / "agent" / "mask.py").read_text()
    mods = {n.module.split(".")[0] if isinstance(n, ast.ImportFrom) and n.module else a.name.split(".")[0]
            for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.Import, ast.ImportFrom)) and n.col_offset == 0
            for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert mods <= set(sys.stdlib_module_names) | {"__future__"}, mods


def test_generic_dict_keys_are_not_secrets() -> None:
    """A table row {"key": "timeout"} is configuration, not a secret; {"token": ...} is."""
    out = Redactor({}).value({"rows": [{"key": "timeout", "value": 5}], "token": "abcd1234", "api_key": "zzzz9999"})
    assert out == {"rows": [{"key": "timeout", "value": 5}], "token": MASK, "api_key": MASK}


def test_redact_loads_standalone_under_an_old_interpreter() -> None:
    """The recorder may run under the training interpreter: the file alone must work there (Python 3.7+)."""
    import glob
    import subprocess
    olds = sorted(glob.glob("/root/.pyenv/versions/3.[789].*/bin/python")) + \
        [p for p in ("/usr/bin/python3.8", "/usr/bin/python3.9") if os.path.exists(p)]
    if not olds:
        pytest.skip("no Python 3.7-3.9 interpreter here to load doctor/agent/mask.py with")
    src = Path(__file__).parent.parent / "doctor" / "agent" / "mask.py"
    code = ("import importlib.util as u; s = u.spec_from_file_location('redact', %r); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); print(m.Redactor.from_env({'HF_TOKEN': 'hf_abcdefabcdef'})"
            ".text('t hf_abcdefabcdef postgres://a:bbbb@h'))" % str(src))
    res = subprocess.run([olds[0], "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "t *** postgres://***@h"


def test_a_setting_named_in_a_mode_variable_is_not_a_secret_but_an_opaque_value_there_is() -> None:
    """RAY_AUTH_MODE=token names Ray's auth mode: masking its value hid the word "token" in every sentence
    ("it has token auth on"). A plain word under a *_MODE/_TYPE/_METHOD name is a setting; anything that could be
    an opaque string there, and the secrets beside it, stay masked."""
    secret = "9c1f0e5d7b3a4c2e8f6d0a1b2c3d4e5f"
    r = Redactor.from_env({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secret, "SIDECAR_AUTH_MODE": "x9f8s7d6f5a4",
                           "TOKEN_TYPE": "Bearer"})
    said = r.text(f"the head has token auth on (RAY_AUTH_MODE=token), token {secret}, mode x9f8s7d6f5a4")
    assert said == f"the head has token auth on (RAY_AUTH_MODE=token), token {MASK}, mode {MASK}", said
    assert r.labels == ["RAY_AUTH_TOKEN", "SIDECAR_AUTH_MODE"]
    assert r.env({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secret}) == {"RAY_AUTH_MODE": "token",
                                                                           "RAY_AUTH_TOKEN": MASK}
    assert r.argv(["x", "--auth-mode", "token", "--auth-token", "hunter2hunter2"]) == \
        ["x", "--auth-mode", "token", "--auth-token", MASK]
    learned = Redactor({})
    learned.learn({"env": {"RAY_AUTH_MODE": "token", "GH_TOKEN": "abcd1234wxyz"}})
    assert learned.text("token abcd1234wxyz") == f"token {MASK}"
