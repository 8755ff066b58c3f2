"""Live recording of real programs: the recorder loop over the native ``LiveRecorder``
(``tierlab record``, ``tierlab overhead``), the lackey trace (``tierlab trace``) and the
importers (``tierlab import``)."""
