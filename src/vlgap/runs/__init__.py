"""One machinery for resumable experiments: cells, claims, run folders and summaries.

An experiment module (`vlgap.probe.sweep`, `vlgap.wsv.experiment`, `vlgap.cape.experiment`) says *what*
its cells are and what determines each (its key); this package says *how* they are run:

- `cells`     a cell keyed by everything that determines it (the reuse rule, `vlgap.reuse`), computed at
              most once, sealed as JSON, read back verified; a stale or corrupt cell is recomputed with
              the reason said;
- `claims`    one process claims a cell by a lock file holding its pid (a dead holder's lock is taken
              over), so several workers share one folder; the oversubscription warning;
- `folder`    the run folder records its whole configuration and refuses a changed one with the list of
              differences (`force` overwrites); a folder of the user's own is never written into;
- `summaries` intervals over seeds (Student t) and over items (bootstrap), Markdown/HTML tables and
              pandas frames.
"""
from vlgap.runs.cells import cell, peek_cell, read_cell, write_cell
from vlgap.runs.claims import (available_cores, claim, claimed, live_holders, lock_holder, lock_path,
                               oversubscription_warning, release)
from vlgap.runs.folder import is_legacy_folder, open_run_folder
from vlgap.runs.summaries import (interval_frame, interval_text, over_items, over_seeds, t_interval, tables_frame,
                                  tables_html, tables_markdown)

__all__ = ["available_cores", "cell", "claim", "claimed", "interval_frame", "interval_text", "is_legacy_folder",
           "live_holders", "lock_holder", "lock_path", "open_run_folder", "over_items", "over_seeds",
           "oversubscription_warning", "peek_cell", "read_cell", "release", "t_interval", "tables_frame", "tables_html",
           "tables_markdown", "write_cell"]
