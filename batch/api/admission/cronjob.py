"""Volcano CronJob admission: cron schedule grammar, time zone, and the job template's spec.

The job template is checked as the job webhook would check a Job created from it (on a
defaulted copy; the CronJob itself is not changed).
"""

from __future__ import annotations

import copy
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

from batch.api.cronjob import CronJob
from batch.api.job import JobSpec

from .common import Errors, as_dict, is_go_duration, schema_validate
from .job import mutate_job_spec, validate_job_spec
from .limits import DEFAULT_LIMITS, AdmissionLimits

__all__ = ["CronSchedule", "is_cron_schedule", "parse_cron_schedule", "validate_cronjob"]

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
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_TZ_PREFIX = re.compile(r"^(CRON_TZ|TZ)=(\S+)\s+")


def _value(token: str, names: dict[str, int]) -> int | None:
    if token.isdigit():
        return int(token)
    return names.get(token.lower())


def _field_values(
    text: str, lo: int, hi: int, names: dict[str, int], *, question: bool
) -> tuple[frozenset[int], bool] | None:
    """The values one field names, and whether it is a wildcard (a part `*` or `?` with no
    step over 1: cron then ANDs day-of-month with day-of-week instead of ORing them); None
    when the field is malformed. `N/step` runs from N to the field's maximum."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        rng, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            return None
        every = int(step) if step else 1
        if rng == "*" or (question and rng == "?"):
            start, end = lo, hi
            star = star or every == 1
        else:
            a, dash, b = rng.partition("-")
            start_v = _value(a, names)
            end_v = _value(b, names) if dash else (hi if step else start_v)
            if start_v is None or end_v is None or not lo <= start_v <= end_v <= hi:
                return None
            start, end = start_v, end_v
        values.update(range(start, end + 1, every))
    return frozenset(values), star


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed schedule: the five fields' values (weekday 0 = Sunday, 7 folded onto 0), or an
    `@every` Go duration, and the time zone of a `TZ=`/`CRON_TZ=` prefix."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    days_star: bool = True
    weekdays_star: bool = True
    every: str | None = None
    time_zone: str | None = None


def parse_cron_schedule(schedule: str) -> CronSchedule:
    """Parse a standard 5-field cron line, a descriptor (`@hourly`) or `@every DURATION`, with
    an optional `TZ=zone ` prefix, as Volcano's controller does (robfig/cron ParseStandard).
    Raises ValueError saying what is wrong."""
    text = schedule.strip()
    zone = None
    m = _TZ_PREFIX.match(text)
    if m:
        try:
            zoneinfo.ZoneInfo(m.group(2))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {m.group(2)!r}") from None
        zone, text = m.group(2), text[m.end() :]
    if text.startswith("@every "):
        dur = text[len("@every ") :].strip()
        if not is_go_duration(dur):
            raise ValueError(f"invalid duration {dur!r}")
        return CronSchedule(every=dur, time_zone=zone)
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise ValueError(f"unknown descriptor {text!r}")
        text = _DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(f"expected 5 fields, got {len(fields)}")
    parsed = []
    for i, (f, (lo, hi, names)) in enumerate(zip(fields, _FIELDS, strict=True)):
        got = _field_values(f, lo, hi, names, question=i in (2, 4))
        if got is None:
            raise ValueError(f"invalid field {i + 1} {f!r}")
        parsed.append(got)
    (mins, _), (hours, _), (days, dstar), (months, _), (wdays, wstar) = parsed
    return CronSchedule(
        minutes=mins,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in wdays),
        days_star=dstar,
        weekdays_star=wstar,
        time_zone=zone,
    )


def is_cron_schedule(schedule: str) -> tuple[bool, str]:
    """Whether `schedule` parses as a standard 5-field cron line (or a descriptor)."""
    try:
        parse_cron_schedule(schedule)
    except ValueError as exc:
        return False, str(exc)
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
