"""The project's commands as one registry, and the tools that read every command: the top layer, so that the packages
below it import nothing above them (``workbench`` imports nothing of ours).

registry (which CLI reads each params.yaml section; which packages hold the CLIs), config (`python -m lmw_cli.config
show SECTION.KEY`: where a setting comes from), cli_docs (docs/cli.md from every CLI's ``--help``, and the check that
every flag explains itself), doc_commands (every ``python -m`` line of the docs names a module that exists and only
flags its CLI has).
"""
