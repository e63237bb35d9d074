"""Differential tests: every scenario against Apache Kafka and kafkawire, outcomes compared.

Targets come from ``KAFKAWIRE_COMPAT_TARGETS`` (default ``kafka,kafkawire``). Each target's
outcome is compared with the reference:

* for kafkawire: Kafka's outcome from this session when ``kafka`` is a target, else the recorded
  one in ``compat_tests/expected/<scenario>.json`` (so kafkawire can be checked without a JVM);
* for kafka: the recorded outcome, if any (catches harness nondeterminism and Kafka drift).
  ``KAFKAWIRE_COMPAT_RECORD=1`` (re)writes the recordings from the live Kafka instead.

Every outcome is also written to ``compat_tests/.results/<target>/<scenario>.json``.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import traceback
from pathlib import Path
from typing import Any

import pytest

from compat_tests.accepted import ACCEPTED, INTERMITTENT, PENDING
from compat_tests.conftest import selected_targets
from compat_tests.scenarios import SCENARIOS, run_scenario

pytestmark = pytest.mark.compat

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"
RESULTS = Path(os.environ.get("KAFKAWIRE_COMPAT_OUT", HERE / ".results"))
FIXTURES = {
    "kafka": "kafka_broker",
    "kafkawire": "kafkawire_compat_broker",
    "kafka39": "kafka39_broker",
}
RECORD = os.environ.get("KAFKAWIRE_COMPAT_RECORD") == "1"


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


def differences(a: Any, b: Any, path: str = "") -> list[tuple[str, str]]:
    """``(path, description)`` of every place where the values differ."""
    for side, x, y in (("target", b, a), ("reference", a, b)):
        if isinstance(x, dict) and set(x) == {"raised"} and x != y:
            return [(path, f"{side} raised {x['raised']} (other side: {json.dumps(y)[:160]})")]
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else str(k)
            if k not in b:
                out.append((p, f"missing in target (reference={json.dumps(a[k])[:120]})"))
            elif k not in a:
                out.append((p, f"only in target ({json.dumps(b[k])[:120]})"))
            else:
                out.extend(differences(a[k], b[k], p))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out.extend(differences(x, y, f"{path}[{i}]"))
        return out
    if a != b:
        return [(path, f"reference={json.dumps(a)[:200]} target={json.dumps(b)[:200]}")]
    return []


def raised_steps(obj: Any, path: str = "") -> list[str]:
    """Paths of steps that raised (``{"raised": ...}``) and a ``scenario_raised`` entry."""
    out: list[str] = []
    if isinstance(obj, dict):
        if set(obj) == {"raised"}:
            return [f"{path}: {obj['raised']}"]
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            out += [f"{p}: {v}"] if k == "scenario_raised" else raised_steps(v, p)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += raised_steps(v, f"{path}[{i}]")
    return out


def accepted_reason(name: str, path: str) -> str | None:
    return _reason(ACCEPTED, name, path)


def pending_reason(name: str, path: str) -> str | None:
    return _reason(PENDING, name, path)


def _reason(table: dict[str, list[tuple[str, str]]], name: str, path: str) -> str | None:
    # a single-node scenario on a cluster ("cluster3/<name>") keeps its single-node entries
    base = name.split("/", 1)[1] if name.startswith("cluster3/") else None
    entries = table.get(name, []) + (table.get(base, []) if base else [])
    for glob, reason in entries:
        if fnmatch.fnmatchcase(path, glob):
            return reason
    return None


def report(
    name: str, ref_label: str, ref: Any, target: str, got: Any, diffs: list[tuple[str, str]]
) -> str:
    udiff = "".join(
        difflib.unified_diff(
            dumps(ref).splitlines(keepends=True),
            dumps(got).splitlines(keepends=True),
            fromfile=f"{ref_label}/{name}",
            tofile=f"{target}/{name}",
            n=2,
        )
    )
    lines = [f"{name}: {target} differs from {ref_label} in {len(diffs)} place(s):"]
    lines += [f"  {p}: {d}" for p, d in diffs[:60]]
    if len(diffs) > 60:
        lines.append(f"  ... {len(diffs) - 60} more")
    if len(udiff) > 12000:
        udiff = udiff[:12000] + f"\n... (diff truncated; full outcomes under {RESULTS})\n"
    lines += ["", udiff]
    return "\n".join(lines)


@pytest.mark.parametrize("target", selected_targets())
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(
    name: str,
    target: str,
    request: pytest.FixtureRequest,
    live_outcomes: dict[tuple[str, str], Any],
) -> None:
    bootstrap = request.getfixturevalue(FIXTURES[target])
    raised: str | None = None
    try:
        got = run_scenario(name, bootstrap)
    except Exception:
        got = {"scenario_raised": traceback.format_exc().strip().splitlines()[-1]}
        raised = traceback.format_exc()
    check_outcome(name, target, got, raised, live_outcomes)


def check_outcome(
    name: str, target: str, got: Any, raised: str | None, live_outcomes: dict[tuple[str, str], Any]
) -> None:
    """Record ``got`` and compare it with the reference (see the module docstring); fails,
    xfails or returns."""
    live_outcomes[(target, name)] = got
    out_file = RESULTS / target / f"{name}.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(dumps(got))

    if target == "kafka":
        _check_kafka(name, got, raised)
        return
    _check_target(name, target, got, raised, live_outcomes)


def _check_kafka(name: str, got: Any, raised: str | None) -> None:
    """Kafka's own outcome: no step may raise; equal to the recording (or recorded)."""
    failures = raised_steps(got)
    if raised or failures:
        pytest.fail(
            f"scenario {name} raised against Apache Kafka (harness bug?):\n"
            + "\n".join(failures)
            + (raised or "")
        )
    expected_file = EXPECTED / f"{name}.json"
    if RECORD:
        expected_file.parent.mkdir(parents=True, exist_ok=True)
        expected_file.write_text(dumps(got))
        return
    if not expected_file.exists():
        return  # nothing recorded to check against
    ref_label, ref = "recorded Kafka", json.loads(expected_file.read_text())
    if ref != got:
        pytest.fail(
            report(name, ref_label, ref, "kafka", got, differences(ref, got))
            + "\n(re-record with KAFKAWIRE_COMPAT_RECORD=1 if Kafka is right)",
            pytrace=False,
        )


def _check_target(
    name: str, target: str, got: Any, raised: str | None, live_outcomes: dict[tuple[str, str], Any]
) -> None:
    if ("kafka", name) in live_outcomes:
        ref_label, ref = "kafka", live_outcomes[("kafka", name)]
    else:
        expected_file = EXPECTED / f"{name}.json"
        if not expected_file.exists():
            pytest.fail(
                f"no Kafka outcome for {name}: run with KAFKAWIRE_COMPAT_TARGETS "
                "including kafka, or record one with KAFKAWIRE_COMPAT_RECORD=1"
            )
        ref_label, ref = "recorded Kafka", json.loads(expected_file.read_text())
    diffs = differences(ref, got)
    accepted = [(p, r) for p, _ in diffs if (r := accepted_reason(name, p)) is not None]
    pending = [
        (p, r) for p, _ in diffs
        if accepted_reason(name, p) is None and (r := pending_reason(name, p)) is not None
    ]
    intermittent = [
        (p, r) for p, _ in diffs
        if accepted_reason(name, p) is None and pending_reason(name, p) is None
        and (r := _reason(INTERMITTENT, name, p)) is not None
    ]
    known = {p for p, _ in accepted} | {p for p, _ in pending} | {p for p, _ in intermittent}
    unexpected = [(p, d) for p, d in diffs if p not in known]
    for p, reason in accepted:
        print(f"accepted difference {name}: {p} ({reason})")
    for p, reason in pending:
        print(f"pending difference {name}: {p} ({reason})")
    for p, reason in intermittent:
        print(f"intermittent difference {name}: {p} ({reason})")
    if unexpected or raised:
        msg = report(name, ref_label, ref, target, got, unexpected)
        if known:
            msg += f"\n({len(known)} accepted or pending difference(s) not shown)"
        if raised:
            msg += f"\n{target} raised:\n{raised}"
        pytest.fail(msg, pytrace=False)
    if pending or intermittent:
        reasons = sorted({r for _, r in pending + intermittent})
        pytest.xfail(f"{len(pending) + len(intermittent)} pending or intermittent "
                     "difference(s): " + "; ".join(reasons))
    if PENDING.get(name):
        pytest.fail(
            f"{name} now matches Kafka apart from accepted differences: remove its PENDING "
            "entries from compat_tests/accepted.py (and its pending rows in FINDINGS.md)",
            pytrace=False,
        )
