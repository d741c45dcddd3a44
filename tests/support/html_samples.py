"""Sample reports built from the result model, for the HTML and redaction tests (and the docs screenshot)."""

from __future__ import annotations

from dfdoctor.model import CheckRecord, Report, Result, Status, Verdict

T0 = 1796220000.0  # 2026-12-02 around 18:00 UTC

TRACEBACK = """Traceback (most recent call last):
  File "/workspace/dflash/train.py", line 12, in <module>
    from flash_attn import flash_attn_func
ModuleNotFoundError: No module named 'flash_attn'
"""

SCRIPT_PAYLOAD = ("</pre></details><script>window.__pwned = 1; document.title = 'PWNED'</script>"
                  "<img src=x onerror=\"window.__pwned = 2\"><svg onload=\"window.__pwned = 3\"></svg>"
                  "<iframe src=\"http://127.0.0.1:9/frame\"></iframe><link rel=stylesheet href=\"http://127.0.0.1:9/x.css\">"
                  "<style>@import url(http://127.0.0.1:9/y.css); body{background:url(http://127.0.0.1:9/z.png)}</style>")


def failed_launch(stderr_extra: str = "", env: dict | None = None) -> Report:
    """A `dfdoctor launch` whose job died at import: missing-module, with pre and post checks and a timeline."""
    stderr = TRACEBACK + stderr_extra
    pre = [
        CheckRecord("target.reach", "pre", Status.OK, "local target: nothing to reach", duration_s=0.001,
                    title="target is reachable"),
        CheckRecord("log.writable", "pre", Status.OK, "/workspace/logs/train.log can be created (folder exists, 41 GiB free)",
                    duration_s=0.004, title="log file can be written"),
        CheckRecord("python.interpreter", "pre", Status.OK, "/opt/venv/bin/python3 runs: Python 3.11.9",
                    duration_s=0.12, title="training interpreter runs"),
        CheckRecord("deps.requirements", "pre", Status.WARN, "requirements.txt: 1 of 14 packages is not installed "
                    "(flash-attn; it is only imported lazily, so the launch may still work)",
                    cause="dependency-missing", fix="Install it in the training interpreter: "
                    "`/opt/venv/bin/python3 -m pip install flash-attn==2.7.4`",
                    evidence=["flash-attn==2.7.4: not installed"], duration_s=0.83, title="requirements installed",
                    data={"packages": [{"name": "torch", "required": "==2.13.0", "installed": "2.13.0", "ok": True},
                                       {"name": "flash-attn", "required": "==2.7.4", "installed": None, "ok": False}]}),
        CheckRecord("cuda.init", "pre", Status.SKIP, "no GPU here and --require-gpu not given", duration_s=0.9,
                    title="CUDA initialises", data={"devices": []}),
    ]
    post = [
        CheckRecord("job.alive", "post", Status.FAIL, "the job exited with status 1 0.41 s after start, before "
                    "it wrote its log", cause="missing-module", details="exit status 1, no signal; max RSS 61 MiB; "
                    "CPU 0.38 s", fix="Install it in the training interpreter: "
                    "`/opt/venv/bin/python3 -m pip install flash-attn==2.7.4`",
                    evidence=["ModuleNotFoundError: No module named 'flash_attn'",
                              'File "/workspace/dflash/train.py", line 12, in <module>'],
                    duration_s=0.02, title="the job is running", output=stderr),
        CheckRecord("log.growing", "post", Status.FAIL, "/workspace/logs/train.log is empty (0 bytes)",
                    cause="missing-module", duration_s=0.01, title="the log grows"),
        CheckRecord("deps.requirements", "post", Status.WARN, "requirements.txt: 1 of 14 packages is not installed",
                    cause="dependency-missing", duration_s=0.8, title="requirements installed"),
    ]
    return Report(
        tool_version="0.1.0", target="local",
        command=["/opt/venv/bin/python3", "-m", "dfdoctor.trainer", "--drafter-threads", "4", "--log-dir", "/workspace/logs"],
        started_at="2026-12-02T18:00:00+00:00", finished_at="2026-12-02T18:00:03+00:00",
        verdict=Verdict("failed", "missing-module",
                        "The job died 0.41 s after start: ModuleNotFoundError: No module named 'flash_attn' "
                        "(train.py line 12)",
                        "Install it in the training interpreter: "
                        "`/opt/venv/bin/python3 -m pip install flash-attn==2.7.4`, then launch again.",
                        ["ModuleNotFoundError: No module named 'flash_attn'",
                         'File "/workspace/dflash/train.py", line 12, in <module>',
                         "exit status 1 after 0.41 s; the log stayed empty"]),
        checks=pre + post,
        timeline=[{"t": T0, "event": "pre-checks", "detail": "5 checks, 1 warning"},
                  {"t": T0 + 1.92, "event": "spawned", "detail": "pid 48211 (pgid 48211, new session)"},
                  {"t": T0 + 2.33, "event": "exited", "detail": "status 1; no log byte was written"},
                  {"t": T0 + 2.35, "event": "post-checks", "detail": "3 checks"}],
        run={"dir": "/workspace/.dfdoctor/runs/20261202-180000-48211", "pid": 48211, "exit_code": 1, "signal": None},
        environment={"host": "pve-node3/ct200", "os": "Linux-6.8.12-4-pve-x86_64-with-glibc2.36",
                     "training_python": "/opt/venv/bin/python3", "python": "3.11.9", "torch": "2.13.0+cpu",
                     "cuda": None, "gpus": [], "target": "local", **(env or {})},
        mode="launch",
    )


def persistence_report() -> Report:
    """A `check` on a pct target whose launch-path and persistence checks produced tables."""
    hops = [{"hop": 1, "runs": "ssh root@pve", "shell": "host sh", "parses": "> /workspace/train.log 2>&1 &",
             "tty": False, "finding": "redirect parsed by the host's shell: the log lands on the host"},
            {"hop": 2, "runs": "pct exec 200 --", "shell": "none (exec lxc-attach)", "parses": "",
             "tty": False, "finding": ""}]
    matrix = [{"strategy": s, "tty": t, "survived": ok, "log": "container" if ok else "", "returned_s": 0.3}
              for s, ok in (("plain &", False), ("nohup setsid -f", True), ("tmux new -d", True))
              for t in (False, True)]
    checks = [
        CheckRecord("launch.path", "pre", Status.FAIL, "the redirect belongs to the host's shell", cause="log-elsewhere",
                    fix="`ssh root@pve 'pct exec 200 -- sh -c \"nohup setsid -f python train.py </dev/null "
                        ">/workspace/train.log 2>&1\"'`", data={"hops": hops}, duration_s=0.01),
        CheckRecord("persistence.session", "pre", Status.OK, "2 of 3 strategies survive", data={"matrix": matrix},
                    duration_s=9.2),
    ]
    return Report("0.1.0", "pct://root@pve/200", ["python", "train.py"], "2026-12-02T18:00:00+00:00",
                  "2026-12-02T18:00:10+00:00", Verdict("failed", "log-elsewhere", "The log would land on the host."),
                  checks=checks, mode="check")


def big_report(n_checks: int = 100, output_bytes: int = 1 << 20, hostile: bool = False) -> Report:
    """`n_checks` checks sharing `output_bytes` of captured output (one of them gets half of it)."""
    line = ("<" * 60 + "\n") if hostile else "step 12034 loss 2.3141 lr 3.0e-04 tok/s 18233 drafter=3 ok\n"
    share = output_bytes // 2 // max(n_checks - 1, 1)
    checks = []
    for i in range(n_checks):
        size = output_bytes // 2 if i == 0 else share
        out = (line * (size // len(line) + 1))[:size]
        st = (Status.OK, Status.WARN, Status.FAIL, Status.SKIP)[i % 4]
        checks.append(CheckRecord(f"bulk.check{i:03d}", "pre" if i % 2 else "post", st, f"check {i} summary " * 3,
                                  details="detail line\n" * 20, evidence=[f"evidence {j}" for j in range(5)],
                                  duration_s=i / 10, output=out,
                                  findings=[Result(st, f"finding {i}")] if i % 5 == 0 else []))
    r = failed_launch()
    r.checks = checks
    return r
