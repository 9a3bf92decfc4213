"""Pass 5, the cross-check, and what it alone uses: the pass itself (checks.py), the locations routed to
ranges of entry-log ids (location_ranges.py), one range's join (range_join.py) and their kernels (kernels.py);
on a DbLedgerStorage bookie the locations database against the entries (db_locations.py)."""
