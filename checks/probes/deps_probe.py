"""Probe: are the job's requirements installed, and do installed distributions agree? Runs in the TRAINING
interpreter, standard library only.

Requirement and marker logic (PEP 440/508) comes from the `packaging` library, loaded without touching
`sys.path` so nothing of dfdoctor's environment leaks into what `importlib.metadata` sees here. It tries, in
order: dfdoctor's own copy (its folder is passed as `packaging_dir`, loaded under a private module name), the
training interpreter's `packaging`, and the copy pip vendors (`pip._vendor.packaging`). When none of
them loads (a pip-less venv on a Python older than dfdoctor's `packaging` supports), `_pep508.py` beside this
file is the fallback. Markers are therefore evaluated for THIS interpreter: its Python version, platform and
machine.

Input (JSON in the file $DFDOCTOR_PROBE_IN): {"requirements": [{"req": "torch>=2.4", "source": "requirements.txt:3",
"constraint": false}], "packaging_dir": "...", "focus": ["torch"], "modules": ["numpy", ...], "job_modules": [...]}:
`modules` are the top-level modules the script imports; their distributions count as what the job depends on;
`job_modules` those the script and the project's modules it imports import, answered with the ones not found here
(`unfound`). On a --target, `read` ({"paths": [...], "max_bytes": N}) names the job's requirement files there:
they are read first, as text_files_probe.py reads them, and answered under `files`, so that they travel in this
probe's own round trip (deps.requirements asks again only where they add requirements).
"""

import importlib
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE in sys.path:  # the probe's folder must not count as a place distributions live
    sys.path.remove(HERE)
sys.path.insert(0, HERE)
from _probe_support import answer, install_stack_dump, request  # noqa: E402
import text_files_probe  # noqa: E402  (the requirement files, read as that probe reads them)

sys.path.remove(HERE)

try:
    from importlib import metadata
except ImportError:  # Python < 3.8
    metadata = None

PRIVATE = "_dfdoctor_packaging"


def load_packaging(packaging_dir):
    """(requirements module, specifiers module, where it came from), or (None, None, reason)."""
    errors = []
    if packaging_dir and os.path.isfile(os.path.join(packaging_dir, "__init__.py")):
        try:
            spec = importlib.util.spec_from_file_location(
                PRIVATE, os.path.join(packaging_dir, "__init__.py"), submodule_search_locations=[packaging_dir])
            mod = importlib.util.module_from_spec(spec)
            sys.modules[PRIVATE] = mod
            spec.loader.exec_module(mod)
            return (importlib.import_module(PRIVATE + ".requirements"), importlib.import_module(PRIVATE + ".version"),
                    "dfdoctor's packaging " + getattr(mod, "__version__", "?"))
        except Exception as exc:  # noqa: BLE001 - a newer packaging on an older Python: try the next
            for name in [m for m in sys.modules if m == PRIVATE or m.startswith(PRIVATE + ".")]:
                del sys.modules[name]
            errors.append("dfdoctor's packaging: %s: %s" % (type(exc).__name__, exc))
    for name in ("packaging", "pip._vendor.packaging"):
        try:
            return (importlib.import_module(name + ".requirements"), importlib.import_module(name + ".version"),
                    name + " " + getattr(importlib.import_module(name), "__version__", "?"))
        except Exception as exc:  # noqa: BLE001
            errors.append("%s: %s: %s" % (name, type(exc).__name__, exc))
    # No packaging works in this interpreter (a pip-less venv on an old Python): use the minimal one.
    pep508 = minimal_pep508()
    return pep508, pep508, "dfdoctor's minimal PEP 508 fallback (" + "; ".join(errors) + ")"


def minimal_pep508():
    """`_pep508.py` beside this file, imported only where no `packaging` loaded: importing it (its patterns
    compiled) was 10 M of the probe's 1.0 G instructions in every run (callgrind)."""
    sys.path.insert(0, HERE)
    try:
        import _pep508
    finally:
        sys.path.remove(HERE)
    return _pep508


def canonical(name):
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(every=None):
    """name → the distribution import finds first, plus every name installed more than once. `every`, a list,
    gets [dist, its METADATA's Name] for each distribution in `metadata.distributions()`'s order, the Name None
    with `broken` set where reading it raised (module_distributions)."""
    first, dups = {}, {}
    for dist in metadata.distributions():
        try:
            # parsed once: `dist.version` and `dist.requires` parse the whole METADATA file again on each use
            # (a third of the probe's CPU, measured in round 9)
            md = dist.metadata
            name = md["Name"]
        except Exception:  # noqa: BLE001 - a broken dist-info
            name = None
            if every is not None:
                every.append([dist, None, "broken"])
        else:
            if every is not None:
                every.append([dist, name, None])
        if not name:
            continue
        key = canonical(name)
        loc = str(getattr(dist, "_path", ""))
        entry = {"name": name, "version": md["Version"], "location": os.path.dirname(loc), "dist": dist,
                 "metadata": md}
        if key in first:
            if os.path.realpath(first[key]["location"]) != os.path.realpath(entry["location"]) or \
                    first[key]["version"] != entry["version"]:
                dups.setdefault(key, [public(first[key])]).append(public(entry))
            continue
        first[key] = entry
    return first, dups


def public(entry):
    """An installed-distribution entry without the live object, for JSON."""
    return {k: v for k, v in entry.items() if k not in ("dist", "metadata", "requires")}


def requires_of(entry):
    """The Requires-Dist lines of an installed distribution (as `Distribution.requires`: METADATA's, else an
    egg-info's requires.txt), read once."""
    if "requires" not in entry:
        try:
            dist = entry["dist"]
            reqs = entry["metadata"].get_all("Requires-Dist") if "metadata" in entry else None
            if reqs is not None:
                entry["requires"] = list(reqs)
            elif "metadata" in entry and getattr(type(dist), "requires", None) is metadata.Distribution.requires \
                    and hasattr(dist, "_read_egg_info_reqs"):
                # what `dist.requires` answers here (3.8-3.13 alike: its METADATA half is the None just read, then
                # requires.txt) without parsing the whole METADATA again: 30 of the dev venv's 100 name none
                entry["requires"] = list(dist._read_egg_info_reqs() or [])
            else:
                entry["requires"] = list(dist.requires or [])
        except Exception:  # noqa: BLE001
            entry["requires"] = []
    return entry["requires"]


def marker_true(req, extra):
    """Evaluate a requirement's marker in this interpreter (with `extra` bound, as pip does)."""
    if req.marker is None:
        return True
    try:
        return req.marker.evaluate({"extra": extra})
    except Exception:  # noqa: BLE001 - an undefined marker variable counts as not applying
        return False


def satisfied(req, version, version_mod):
    """Does an installed version satisfy the requirement's specifier (pre-releases allowed, as pip check)?"""
    if getattr(req, "url", None) or not str(req.specifier):
        return True
    try:
        return req.specifier.contains(version_mod.Version(version), prereleases=True)
    except Exception:  # noqa: BLE001 - a non-PEP 440 installed version: compare as text, else give it the benefit
        try:
            return req.specifier.contains(version, prereleases=True)
        except Exception:  # noqa: BLE001
            return True


def check_requirement(item, req_mod, version_mod, dists, out, closure_roots, extra=""):
    """Evaluate one requested requirement; append its outcome to out["results"]."""
    text = item["req"]
    res = {"req": text, "source": item.get("source"), "constraint": bool(item.get("constraint"))}
    try:
        req = req_mod.Requirement(text)
    except Exception as exc:  # noqa: BLE001
        res.update(status="unparsable", error=str(exc))
        out["results"].append(res)
        return
    res["name"] = req.name
    res["specifier"] = str(req.specifier)
    res["marker"] = str(req.marker) if req.marker else None
    if not marker_true(req, extra):
        res["status"] = "not-applicable"
        out["results"].append(res)
        return
    entry = dists.get(canonical(req.name))
    if entry is None:
        res["status"] = "ok" if res["constraint"] else "missing"
        out["results"].append(res)
        return
    res["installed"] = entry["version"]
    res["location"] = entry["location"]
    res["status"] = "ok" if satisfied(req, entry["version"], version_mod) else "mismatch"
    out["results"].append(res)
    if res["constraint"]:
        return
    closure_roots.add(canonical(req.name))
    for ex in sorted(req.extras):  # `pkg[extra]` also requires what that extra pulls in
        for dep in requires_of(entry):
            try:
                dreq = req_mod.Requirement(dep)
            except Exception:  # noqa: BLE001
                continue
            if dreq.marker is not None and "extra" in str(dreq.marker) and marker_true(dreq, ex):
                check_requirement({"req": dep.split(";")[0].strip(), "source": "%s[%s] (from %s)" % (req.name, ex,
                                   item.get("source"))}, req_mod, version_mod, dists, out, closure_roots)


def conflicts(dists, req_mod, version_mod):
    """Like `pip check`, offline: every installed distribution's own requirements, checked against what is installed."""
    found = []
    graph = {}
    for key, entry in dists.items():
        deps = graph.setdefault(key, [])
        for line in requires_of(entry):
            try:
                req = req_mod.Requirement(line)
            except Exception:  # noqa: BLE001 - pip check skips what it cannot parse too
                continue
            if not marker_true(req, ""):
                continue
            dep = dists.get(canonical(req.name))
            deps.append(canonical(req.name))
            if dep is None:
                found.append({"dist": entry["name"], "version": entry["version"], "requirement": line,
                              "name": req.name, "installed": None, "problem": "missing"})
            elif not satisfied(req, dep["version"], version_mod):
                found.append({"dist": entry["name"], "version": entry["version"], "requirement": line,
                              "name": req.name, "installed": dep["version"], "problem": "mismatch"})
    return found, graph


def top_level_names(dists):
    """module -> the distributions whose top_level.txt names it."""
    mapping = {}
    for entry in dists.values():
        try:
            text = entry["dist"].read_text("top_level.txt") or ""
        except Exception:  # noqa: BLE001
            continue
        for mod in text.split():
            mapping.setdefault(mod, []).append(entry["name"])
    return mapping


def importable(module):
    """Whether this interpreter finds the top-level module (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:  # noqa: BLE001 - a broken package still counts: the full finder decides
        return True


def module_distributions(every):
    """`metadata.packages_distributions()`, the same map, without parsing every METADATA file again: the Names
    `installed()` read (`every`) stand in for its `dist.metadata['Name']`, which parses the whole file through
    the email parser on each use (once per module a distribution provides: 146 parses on the dev venv's 100
    distributions, after installed()'s 100; round 23). Each distribution's modules come from the standard
    library's own helpers, so they are its answer by construction; where those helpers are not the ones this
    code was checked against (another Python), or a METADATA did not read, the standard library's function
    itself answers (tests/test_deps_module_map.py compares the two on every interpreter here)."""
    finder = metadata.packages_distributions
    if sys.version_info[:2] == (3, 10):  # 3.10's: top_level.txt alone
        def modules_of(dist):
            return (dist.read_text('top_level.txt') or '').split()
    elif (3, 11) <= sys.version_info[:2] <= (3, 13) and hasattr(metadata, "_top_level_declared") and \
            hasattr(metadata, "_top_level_inferred"):
        def modules_of(dist):
            return metadata._top_level_declared(dist) or metadata._top_level_inferred(dist)
    else:
        return finder()
    if every is None or any(broken for _, _, broken in every):
        return finder()  # it raises where a METADATA does not read, or reads it only for a dist with modules
    mapping = {}
    for dist, name, _ in every:
        for pkg in modules_of(dist):
            mapping.setdefault(pkg, []).append(name)
    return mapping


def imported_distributions(modules, dists=None, every=None):
    """The distributions that provide the top-level modules the script imports (Python 3.10+; else none)."""
    finder = getattr(metadata, "packages_distributions", None)
    if finder is None or not modules:
        return []
    try:
        # top_level.txt names most distributions' modules in one short read; the full finder reads every RECORD
        # (0.04 s CPU of a 0.15 s probe, round 9), so it runs only for a module found here that none names
        mapping = top_level_names(dists or {})
        if any(m not in mapping and importable(m) for m in modules):
            mapping = module_distributions(every)
    except Exception:  # noqa: BLE001 - a broken RECORD somewhere must not stop the check
        return []
    found = []
    for mod in modules:
        for dist in mapping.get(mod, []):
            if dist not in found:
                found.append(dist)
    return found


def closure(roots, graph):
    """Every distribution reachable from `roots` through installed requirements."""
    seen, todo = set(), list(roots)
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        todo.extend(graph.get(k, []))
    return seen


def path_state():
    """[folder, mtime_ns or None] for each place on the import path, and the user's site folder (present or not):
    installing or removing anything changes one of them, so an answer is reused only while none changed
    (checks/deps_answer.py)."""
    places = list(sys.path)
    try:
        import site
        places.append(site.getusersitepackages())
    except Exception:  # noqa: BLE001 - no site module (python -S): nothing more to watch
        pass
    state = []
    for place in dict.fromkeys(os.path.abspath(p or os.curdir) for p in places):
        try:
            state.append([place, os.stat(place).st_mtime_ns])
        except OSError:
            state.append([place, None])
    return state


def pth_state():
    """[file, sha1 of its bytes] for each file that decides the import path without a folder's mtime changing
    when it is rewritten in place: the `.pth` files (and sitecustomize/usercustomize) of the site folders on the
    import path, and the venv's pyvenv.cfg (include-system-site-packages). An answer is reused only while each
    reads the same (checks/deps_answer.py)."""
    import hashlib
    files = [os.path.join(sys.prefix, "pyvenv.cfg")]
    for place in dict.fromkeys(os.path.abspath(p or os.curdir) for p in sys.path):
        if os.path.basename(place) not in ("site-packages", "dist-packages"):
            continue
        try:
            files += [os.path.join(place, n) for n in sorted(os.listdir(place))
                      if n.endswith(".pth") or n in ("sitecustomize.py", "usercustomize.py")]
        except OSError:
            continue
    state = []
    for path in files:  # a missing one (no venv) is kept as None: one made later is a change
        try:
            with open(path, "rb") as f:
                state.append([path, hashlib.sha1(f.read(1 << 20)).hexdigest()])
        except OSError:
            state.append([path, None])
    return state


def main():
    """Evaluate the requirements, scan for conflicts and duplicates, answer."""
    install_stack_dump()
    before = path_state()  # taken first: a change while the distributions are read shows up as a change later
    pth_before = pth_state()
    spec = request()
    out = {"python": sys.version.split()[0], "executable": sys.executable, "results": [], "conflicts": [],
           "duplicates": {}, "closure": [], "n_dists": 0}
    if spec.get("read"):  # first: they are answered whatever this interpreter can evaluate
        out["files"] = text_files_probe.files(spec["read"])
    if metadata is None:
        out["error"] = "importlib.metadata needs Python 3.8 or newer (this is %s)" % out["python"]
        answer(out)
        return
    req_mod, version_mod, where = load_packaging(spec.get("packaging_dir"))
    out["packaging"] = where
    if req_mod is None:
        out["error"] = "no PEP 508 parser could be loaded here: " + where
        answer(out)
        return
    every = []
    dists, dups = installed(every)
    out["n_dists"] = len(dists)
    # torch's family is released and built as a set: report their versions (local build tags included) so the
    # check can tell a torchvision of another release or build from the one paired with this torch
    out["torch_family"] = dict((n, dists[n]["version"]) for n in ("torch", "torchvision", "torchaudio") if n in dists)
    out["duplicates"] = dups
    roots = set()
    for item in spec.get("requirements") or []:
        check_requirement(item, req_mod, version_mod, dists, out, roots)
    for name in spec.get("focus") or []:
        if canonical(name) in dists:
            roots.add(canonical(name))
            out.setdefault("focus", {})[name] = dists[canonical(name)]["version"]
    stated = set(roots)  # what the requirements and the focus name, apart from what reading the script found
    for dist_name in imported_distributions(spec.get("modules") or [], dists, every):
        roots.add(canonical(dist_name))
        out.setdefault("imported", []).append(dist_name)
    # the job's imports this interpreter cannot find: a missing requirement may provide one under another name
    out["unfound"] = [m for m in spec.get("job_modules") or [] if not importable(m)]
    found, graph = conflicts(dists, req_mod, version_mod)
    relevant = closure(roots, graph)
    named = closure(stated, graph)
    for c in found:
        c["relevant"] = canonical(c["dist"]) in relevant
        c["stated"] = canonical(c["dist"]) in named  # False: relevant only through the script's imports
    out["conflicts"] = found
    out["closure"] = sorted(relevant)
    out["path_state"] = before
    out["pth_state"] = pth_before
    answer(out)


if __name__ == "__main__":
    main()
