"""The run folder ``reports/<run_id>/`` as one typed schema: every file name, column and JSON
key of it, its format version, and its readers and writers (:mod:`.runfolder`)."""
