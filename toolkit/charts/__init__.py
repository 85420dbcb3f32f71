"""The floor the pages stand on: chart helpers (``figure``), numbers for a reader (``numbers``) and the
pages' stylesheet and security policy (``page``). ``toolkit/report/``, ``toolkit/whatif/`` and
``toolkit/history/`` draw through it; it imports nothing of the toolkit."""
