"""Volcano CronJob admission: cron schedule grammar, time zone, and the job template's spec.

The job template is checked as the job webhook would check a Job created from it (on a
defaulted copy; the CronJob itself is not changed).
"""

from __future__ import annotations

import copy
import re
import zoneinfo
from typing import Any

from batch.api.cronjob import CronJob
from batch.api.job import JobSpec

from .common import Errors, as_dict, is_go_duration, schema_validate
from .job import mutate_job_spec, validate_job_spec
from .limits import DEFAULT_LIMITS, AdmissionLimits

__all__ = ["is_cron_schedule", "validate_cronjob"]

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 7, _DAYS),
)
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_TZ_PREFIX = re.compile(r"^(CRON_TZ|TZ)=(\S+)\s+")


def _value(token: str, names: dict[str, int]) -> int | None:
    if token.isdigit():
        return int(token)
    return names.get(token.lower())


def _field_ok(text: str, lo: int, hi: int, names: dict[str, int], *, question: bool) -> bool:
    for part in text.split(","):
        rng, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            return False
        if rng in ("*",) or (question and rng == "?"):
            continue
        a, dash, b = rng.partition("-")
        start = _value(a, names)
        end = _value(b, names) if dash else start
        if start is None or end is None or not lo <= start <= end <= hi:
            return False
    return True


def is_cron_schedule(schedule: str) -> tuple[bool, str]:
    """Whether `schedule` parses as a standard 5-field cron line (or a descriptor)."""
    text = schedule.strip()
    m = _TZ_PREFIX.match(text)
    if m:
        try:
            zoneinfo.ZoneInfo(m.group(2))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return False, f"unknown time zone {m.group(2)!r}"
        text = text[m.end() :]
    if text.startswith("@"):
        if text in _DESCRIPTORS:
            return True, ""
        if text.startswith("@every "):
            dur = text[len("@every ") :].strip()
            return (True, "") if is_go_duration(dur) else (False, f"invalid duration {dur!r}")
        return False, f"unknown descriptor {text!r}"
    fields = text.split()
    if len(fields) != 5:
        return False, f"expected 5 fields, got {len(fields)}"
    for i, (f, (lo, hi, names)) in enumerate(zip(fields, _FIELDS, strict=True)):
        if not _field_ok(f, lo, hi, names, question=i in (2, 4)):
            return False, f"invalid field {i + 1} {f!r}"
    return True, ""


def validate_cronjob(
    cj: CronJob, raw: dict[str, Any], errors: Errors, *, limits: AdmissionLimits = DEFAULT_LIMITS
) -> None:
    spec = cj.spec
    if spec is None:
        errors.add("spec", "required", "a CronJob needs a spec")
        return
    ok, why = is_cron_schedule(spec.schedule)
    if not ok:
        errors.add("spec.schedule", "cronSchedule", f"{spec.schedule!r}: {why}")
    if spec.time_zone is not None:
        try:
            zoneinfo.ZoneInfo(spec.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            errors.add("spec.timeZone", "timeZone", f"unknown time zone {spec.time_zone!r}")
        if _TZ_PREFIX.match(spec.schedule.strip()):
            errors.add("spec.schedule", "timeZone", "TZ in schedule and spec.timeZone both set")
    tmpl_raw = as_dict((as_dict(as_dict(raw.get("spec")) or {}) or {}).get("jobTemplate")) or {}
    job_spec_raw = copy.deepcopy(as_dict(tmpl_raw.get("spec")) or {})
    user_min = {
        i: isinstance(t, dict) and t.get("minAvailable") is not None
        for i, t in enumerate(job_spec_raw.get("tasks") or [])
    }
    mutate_job_spec(job_spec_raw)
    job_spec = schema_validate(JobSpec, job_spec_raw, _Prefixed(errors, "spec.jobTemplate.spec"))
    if isinstance(job_spec, JobSpec):
        validate_job_spec(
            job_spec,
            path="spec.jobTemplate.spec",
            job_name=None,
            user_min_available=user_min,
            errors=errors,
            limits=limits,
        )


class _Prefixed(Errors):
    """Errors collector that prefixes paths (for a sub-object validated on its own)."""

    def __init__(self, inner: Errors, prefix: str) -> None:
        super().__init__(inner.ref)
        self._inner, self._prefix = inner, prefix

    def add(self, path: str, rule: str, message: str) -> None:
        full = (
            f"{self._prefix}.{path}" if path and not path.startswith("[") else self._prefix + path
        )
        self._inner.add(full, rule, message)
