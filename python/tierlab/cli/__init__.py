"""The ``tierlab`` command line: one module per subcommand, dispatched by :mod:`.main`."""
