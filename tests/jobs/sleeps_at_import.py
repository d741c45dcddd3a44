"""A module whose import takes two seconds without spending CPU: a `check` of `python -c "import sleeps_at_import"`
(imports.smoke imports it) lasts that long past dfdoctor's start-up, whatever the machine's speed."""
import time

time.sleep(2)
