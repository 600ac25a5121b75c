"""Pure parsers, one conversion hop per module, named ``<source>_to_<target>``; each states its version."""
