"""Moments as the admin's lists show them (``catalog.admin.display.compact_time``): 2026-12-04 15:38, local time.
Django's English default ('Dec. 4, 2026, 3:38 p.m.') stayed on detail pages (a server's last sync, a token, a
review, a query-log entry) and read unlike the lists beside them."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
