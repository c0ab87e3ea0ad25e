"""Schedules: autoscheduler drivers, hand templates, tuning runs and database."""

from .autoschedule import (NO_SCHEDULE, SCHEDULERS, ScheduleSpec, default_parallelism,
                           fallback_chain, make_spec, parse_autoscheduler)

__all__ = ["NO_SCHEDULE", "SCHEDULERS", "ScheduleSpec", "default_parallelism",
           "fallback_chain", "make_spec", "parse_autoscheduler"]
