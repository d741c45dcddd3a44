"""Installs a requirements file into the venv with uv where it can, with the venv's pip where it cannot.

Run by the Makefile as `VENV/bin/python .ci/venv_install.py VENV REQUIREMENTS` (`make demo` and `make venv`, in CI
or not). uv installs the same pinned set as pip from the same sources, in parallel: pip installs one package
at a time on one core (the Makefile's comments have the figures). uv reads none of pip's configuration, so the
settings pip would use here (its config files and PIP_* variables, read by pip itself) are given to uv on its
command line, and a pip setting uv is not told of sends the install to pip. uv is pinned (UV_VERSION); it is taken
from VENV/.uv, or from PATH at that version, or installed into VENV/.uv by the venv's pip (from pip's own sources):
never into VENV/bin, so nothing run with the venv on its PATH (the tests, dfdoctor) finds a uv it did not have before.
Where none of that works, or uv fails, the venv's pip installs the file as it always did, after one line saying why.
"""
import os
import shutil
import subprocess
import sys

UV_VERSION = "0.13.10"

# pip's install options that uv is given (below); any other one set in pip's configuration makes pip install.
# The rest do not change what is installed from where: pip's own chatter, its cache, its version check.
GIVEN = {"index_url", "extra_index_urls", "no_index", "find_links", "constraints", "cert", "timeout", "compile"}
HARMLESS = {"disable_pip_version_check", "progress_bar", "cache_dir", "verbose", "quiet", "retries",
            "no_python_version_warning", "no_color", "root_user_action"}


def pip_settings(requirements):
    """The options pip would install `requirements` with here, and those of pip's options uv is not told of."""
    from pip._internal.commands import create_command
    args = ["-r", requirements]
    options, _ = create_command("install").parse_args(args)
    # pip's defaults: no config file at all (PIP_CONFIG_FILE=os.devnull) and no PIP_* variable (isolated)
    saved = os.environ.get("PIP_CONFIG_FILE")
    os.environ["PIP_CONFIG_FILE"] = os.devnull
    try:
        defaults, _ = create_command("install", isolated=True).parse_args(args)
    finally:
        if saved is None:
            del os.environ["PIP_CONFIG_FILE"]
        else:
            os.environ["PIP_CONFIG_FILE"] = saved
    ours, theirs = vars(options), vars(defaults)
    untold = sorted(k for k in ours if k not in GIVEN | HARMLESS and ours[k] != theirs.get(k))
    return options, untold


def uv_version(path):
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[1] if len(out) > 1 else None


def find_uv(venv):
    """The pinned uv: VENV/.uv's, PATH's, or one the venv's pip installs into VENV/.uv (None if none works)."""
    own = os.path.join(venv, ".uv", "bin", "uv")
    for path in (own, shutil.which("uv")):
        if path and uv_version(path) == UV_VERSION:
            return path
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--upgrade", "--target", os.path.join(venv, ".uv"), f"uv=={UV_VERSION}"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return own if uv_version(own) == UV_VERSION else None


def uv_command(uv, venv, requirements, options):
    cmd = [uv, "pip", "install", "--quiet", "--no-config", "--python", os.path.join(venv, "bin", "python"),
           # pip takes the best version from all its indexes and links together
           "--index-strategy", "unsafe-best-match"]
    if options.compile:
        # pip compiles every module it installs: without the .pyc files each `import torch` of the tests compiles
        # it again (PYTHONDONTWRITEBYTECODE=1 on our machines). uv compiles the same files the same way
        # (timestamp-checked, or as SOURCE_DATE_EPOCH asks, as pip's py_compile does), on every core.
        cmd.append("--compile-bytecode")
    if options.no_index:
        cmd.append("--no-index")
    else:
        cmd += ["--index-url", options.index_url]
        for url in options.extra_index_urls:
            cmd += ["--extra-index-url", url]
    for link in options.find_links:
        cmd += ["--find-links", link]
    for constraint in options.constraints:
        cmd += ["--constraint", constraint]
    return cmd + ["-r", requirements]


def uv_environment(venv, options):
    # No UV_* setting of the caller changes what uv installs from where; uv's cache is kept beside the venv's
    # files, on their disk (uv links the files it installs to its cache), and goes with `make clean`.
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env["UV_CACHE_DIR"] = os.path.join(venv, ".uv-cache")
    env["UV_HTTP_TIMEOUT"] = str(max(1, round(options.timeout)))
    if options.cert:
        env["SSL_CERT_FILE"] = options.cert
    return env


def with_pip(requirements):
    return subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "-r", requirements]).returncode


def main(venv, requirements):
    try:
        options, untold = pip_settings(requirements)
    except Exception as exc:  # a pip without the API read here: it installs, as it always did
        return why_pip(f"pip's settings could not be read ({exc!r})", requirements)
    if untold:
        return why_pip(f"pip is set up with {', '.join(untold)}, which uv is not told of", requirements)
    uv = find_uv(venv)
    if uv is None:
        return why_pip(f"uv {UV_VERSION} could not be had", requirements)
    code = subprocess.run(uv_command(uv, venv, requirements, options), env=uv_environment(venv, options)).returncode
    if code:
        return why_pip(f"uv {UV_VERSION} failed (exit {code})", requirements)
    return 0


def why_pip(reason, requirements):
    print(f"venv_install: {reason}; pip installs {requirements} (slower)", file=sys.stderr)
    return with_pip(requirements)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
